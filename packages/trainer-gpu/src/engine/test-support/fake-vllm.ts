/**
 * A stand-in for a vLLM OpenAI server started with `--enable-lora` and
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, for testing the external-engine path without a GPU. It really
 * generates: the base checkpoint and every loaded adapter are served by a PolicyServer over their own
 * copy of the weights (so token ids and log-probs are the engine's own, as vLLM's would be), and it
 * speaks vLLM's wire format for what the trainer uses:
 *
 * - `POST /v1/load_lora_adapter {lora_name, lora_path, load_inplace?}`: 200 with the plain-text success
 *   line; 400 for a missing name/path or a name already loaded; 404 when the path does not exist; 500
 *   when the folder is not a loadable PEFT adapter for this base (peft-check.ts, then the real load);
 * - `POST /v1/unload_lora_adapter {lora_name, lora_int_id?}`: 200, or 404 for an unknown name; stricter
 *   than vLLM, 409 while requests are still generating on the adapter (asynchronous training publishes
 *   new versions while calls run: a sync must never pull an adapter from under them);
 * - `GET /v1/models`: the base model and every adapter (`parent` = the base);
 * - `POST /v1/chat/completions`, `/v1/completions`: served by the model named in `model`; an unknown
 *   name is 404 "The model `x` does not exist.".
 *
 * It records every load, unload and served call in order, so a test can check which adapter served
 * which call.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Readable } from "node:stream";
import { z } from "zod";
import { loadPretrained } from "../../pretrained/load.js";
import { loadPeftAdapter } from "../../pretrained/peft.js";
import { PolicyServer } from "../../server/policy-server.js";
import type { ChatTemplate } from "../../tokenizer/chat-template.js";
import type { Tokenizer } from "../../tokenizer/tokenizer.js";
import { baseShape, checkPeftFolder } from "./peft-check.js";

export type EngineEvent =
  | { type: "load"; name: string; path: string }
  | { type: "unload"; name: string }
  /** An unload refused because requests were still generating on the adapter. */
  | { type: "unload_refused"; name: string; inflight: number }
  | { type: "serve"; model: string; path: string; status: number };

export interface FakeVllm {
  /** Server root (vLLM's routes are under /v1). */
  url: string;
  events: EngineEvent[];
  /** Names currently loaded. */
  adapters(): string[];
  /** The PolicyServer behind a model name (to compare the engine's weights with the trainer's). */
  serverFor(model: string): PolicyServer | undefined;
  /**
   * Serve the base model from the checkpoint in `dir` from now on: what restarting vLLM on a new
   * checkpoint (or SGLang's update_weights_from_disk) does. The reload hook of full-weight sync calls it.
   */
  reloadBase(dir: string): Promise<void>;
  close(): Promise<void>;
}

export interface FakeVllmOptions {
  baseDir: string;
  tokenizer: Tokenizer;
  template: ChatTemplate;
  /** `--served-model-name` (default: the base directory). */
  servedModelName?: string;
  /** `--max-lora-rank` (vLLM's default 16). */
  maxLoraRank?: number;
  /** VLLM_ALLOW_RUNTIME_LORA_UPDATING (default true); false leaves the two routes out, as vLLM does. */
  runtimeLoraUpdating?: boolean;
}

const LoadRequest = z.object({
  lora_name: z.string(),
  lora_path: z.string(),
  load_inplace: z.boolean().default(false),
});
const UnloadRequest = z.object({
  lora_name: z.string(),
  lora_int_id: z.number().int().nullable().optional(),
});

function errorBody(message: string, type: string, code: number, param: string | null = null) {
  return { error: { message, type, param, code } };
}

export async function startFakeVllm(options: FakeVllmOptions): Promise<FakeVllm> {
  const baseConfig = JSON.parse(await readFile(join(options.baseDir, "config.json"), "utf8"));
  const shape = baseShape(baseConfig);
  const baseName = options.servedModelName ?? options.baseDir;
  let baseDir = options.baseDir;
  const serve = async (name: string, adapterDir: string | null) => {
    const { model } = await loadPretrained(baseDir);
    if (adapterDir) await loadPeftAdapter(model, adapterDir);
    return new PolicyServer({
      model,
      tokenizer: options.tokenizer,
      template: options.template,
      modelName: name,
    });
  };
  const servers = new Map<string, { server: PolicyServer; path: string | null }>();
  servers.set(baseName, { server: await serve(baseName, null), path: null });
  const events: EngineEvent[] = [];
  /** Requests generating per model name. */
  const inflight = new Map<string, number>();

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  };
  const text = (res: ServerResponse, status: number, body: string) => {
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
    res.end(body);
  };
  const readJson = async (req: IncomingMessage): Promise<unknown> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
  };
  const invalid = (res: ServerResponse, error: z.ZodError) =>
    json(
      res,
      400,
      errorBody(
        error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "),
        "BadRequestError",
        400,
      ),
    );

  const load = async (req: IncomingMessage, res: ServerResponse) => {
    const parsed = LoadRequest.safeParse(await readJson(req));
    if (!parsed.success) return invalid(res, parsed.error);
    const { lora_name: name, lora_path: path, load_inplace } = parsed.data;
    if (!name || !path) {
      return json(
        res,
        400,
        errorBody("Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput", 400),
      );
    }
    if (!load_inplace && servers.has(name)) {
      return json(
        res,
        400,
        errorBody(
          `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
          "InvalidUserInput",
          400,
        ),
      );
    }
    if (!existsSync(path)) {
      return json(
        res,
        404,
        errorBody(`Loading lora ${name} failed: No adapter found for ${path}`, "NotFoundError", 404),
      );
    }
    try {
      await checkPeftFolder(path, shape, options.maxLoraRank ?? 16);
      const server = await serve(name, path);
      servers.get(name)?.server.model.dispose();
      servers.set(name, { server, path });
    } catch (error) {
      return json(res, 500, errorBody((error as Error).message, "InternalServerError", 500));
    }
    events.push({ type: "load", name, path });
    return text(res, 200, `Success: LoRA adapter '${name}' added successfully.`);
  };

  const unload = async (req: IncomingMessage, res: ServerResponse) => {
    const parsed = UnloadRequest.safeParse(await readJson(req));
    if (!parsed.success) return invalid(res, parsed.error);
    const name = parsed.data.lora_name;
    if (!name) {
      return json(
        res,
        400,
        errorBody("'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput", 400),
      );
    }
    const entry = servers.get(name);
    if (!entry || entry.path === null) {
      return json(res, 404, errorBody(`The lora adapter '${name}' cannot be found.`, "NotFoundError", 404));
    }
    const busy = inflight.get(name) ?? 0;
    if (busy > 0) {
      events.push({ type: "unload_refused", name, inflight: busy });
      return json(
        res,
        409,
        errorBody(`The lora adapter '${name}' is serving ${busy} requests.`, "Conflict", 409),
      );
    }
    servers.delete(name);
    entry.server.model.dispose();
    events.push({ type: "unload", name });
    return text(res, 200, `Success: LoRA adapter '${name}' removed successfully.`);
  };

  const generate = async (req: IncomingMessage, res: ServerResponse, path: string) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    let model = "";
    try {
      model = String((JSON.parse(raw.toString("utf8")) as { model?: unknown }).model ?? "");
    } catch {
      return json(res, 400, errorBody("invalid JSON body", "BadRequestError", 400));
    }
    const entry = servers.get(model);
    if (!entry) {
      events.push({ type: "serve", model, path, status: 404 });
      return json(
        res,
        404,
        errorBody(`The model \`${model}\` does not exist.`, "NotFoundError", 404, "model"),
      );
    }
    inflight.set(model, (inflight.get(model) ?? 0) + 1);
    let ended = false;
    const done = () => {
      if (ended) return;
      ended = true;
      inflight.set(model, (inflight.get(model) ?? 1) - 1);
    };
    let answer: Response;
    try {
      answer = await entry.server.app.fetch(
        new Request(`http://engine${path}`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: raw,
        }),
      );
    } catch (error) {
      done();
      throw error;
    }
    events.push({ type: "serve", model, path, status: answer.status });
    const headers: Record<string, string> = {};
    answer.headers.forEach((value, key) => {
      // vLLM says nothing about policy versions: the PolicyServer's own counter must not leak through.
      if (key !== "x-agl-model-version") headers[key] = value;
    });
    res.writeHead(answer.status, headers);
    if (!answer.body) {
      done();
      res.end();
      return;
    }
    // A streamed answer is still generating until its body ends.
    const body = Readable.fromWeb(answer.body as never);
    body.once("end", done);
    body.once("error", done);
    res.once("close", done);
    body.pipe(res);
  };

  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://engine").pathname;
    const route = `${req.method} ${path}`;
    const lora = options.runtimeLoraUpdating ?? true;
    const handle = async () => {
      if (route === "GET /v1/models") {
        return json(res, 200, {
          object: "list",
          data: [...servers.entries()].map(([id, e]) => ({
            id,
            object: "model",
            owned_by: "vllm",
            root: e.path ?? options.baseDir,
            parent: e.path === null ? null : baseName,
          })),
        });
      }
      if (lora && route === "POST /v1/load_lora_adapter") return load(req, res);
      if (lora && route === "POST /v1/unload_lora_adapter") return unload(req, res);
      if (route === "POST /v1/chat/completions" || route === "POST /v1/completions")
        return generate(req, res, path);
      return json(res, 404, { detail: "Not Found" });
    };
    handle().catch((error) => json(res, 500, errorBody(String(error), "InternalServerError", 500)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    events,
    adapters: () => [...servers.entries()].filter(([, e]) => e.path !== null).map(([n]) => n),
    serverFor: (model) => servers.get(model)?.server,
    reloadBase: async (dir) => {
      baseDir = dir;
      const old = servers.get(baseName)!;
      servers.set(baseName, { server: await serve(baseName, null), path: null });
      old.server.model.dispose();
      events.push({ type: "load", name: baseName, path: dir });
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const { server: s } of servers.values()) s.model.dispose();
      servers.clear();
    },
  };
}
