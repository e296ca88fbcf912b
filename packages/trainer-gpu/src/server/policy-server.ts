import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { InvalidArgumentError } from "@agl/core";
import { type ServerType, serve } from "@hono/node-server";
import { type Context, Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { streamSSE } from "hono/streaming";
import type { z } from "zod";
import { type GenerateRequest, type GenerateResult, Generator, type TokenEvent } from "../generate/generator.js";
import type { PolicyModel } from "../model/policy-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import { TOOL_CALL_OPEN } from "../tokenizer/tool-calls.js";
import { assistantMessage, chatLogprobs, completionFinishReason, completionLogprobs } from "./format.js";
import {
  type ChatCompletionRequest,
  ChatCompletionRequestSchema,
  type CompletionRequest,
  CompletionRequestSchema,
  HttpError,
  zodToHttpError,
} from "./schemas.js";

export interface PolicyServerOptions {
  model: PolicyModel;
  tokenizer: Tokenizer;
  template?: ChatTemplate;
  /** Share a generator (e.g. with in-process sampling); created from model/tokenizer when absent. */
  generator?: Generator;
  /** The model id clients must send (default "agl-policy"). */
  modelName?: string;
  host?: string;
  /** 0 = any free port (default). */
  port?: number;
  /** When set, every route except /health requires `Authorization: Bearer <apiKey>`. */
  apiKey?: string;
  /** Request body limit in bytes (default 4 MiB). */
  bodyLimitBytes?: number;
  /** Generation deadline per request; the request is cut off with 504 / a closed stream (default 300 s). */
  requestTimeoutMs?: number;
  /** Most sequences decoded together when the server creates its generator (default 64). */
  maxBatchSize?: number;
}

type Choice = { index: number; result: GenerateResult };

function newId(prefix: string): string {
  return `${prefix}-${randomBytes(12).toString("hex")}`;
}

const nowSec = () => Math.floor(Date.now() / 1000);

/**
 * An OpenAI-compatible server for a PolicyModel (chat + completions, streaming, tools, vLLM token ids and
 * logprobs), backed by the dynamic-batching Generator.
 *
 * Weight updates: `swapWeights()` pauses admission, waits for running sequences to finish (requests that
 * arrive meanwhile queue; nothing is dropped), applies the new weights, increments `version` and resumes.
 * Every response reports the version that produced it in `system_fingerprint` ("agl-policy-v<N>") and the
 * `x-agl-model-version` header; the `n` choices of one request always share one version.
 */
export class PolicyServer {
  readonly generator: Generator;
  readonly tokenizer: Tokenizer;
  readonly template: ChatTemplate;
  readonly modelName: string;
  readonly app: Hono;
  private readonly options: PolicyServerOptions;
  private server: ServerType | undefined;
  private _url: string | undefined;
  private inflight = 0;
  private readonly created = nowSec();

  constructor(options: PolicyServerOptions) {
    this.options = options;
    this.tokenizer = options.tokenizer;
    this.template = options.template ?? new ChatTemplate(options.tokenizer);
    this.generator = options.generator ?? new Generator(options.model, options.tokenizer, { maxBatchSize: options.maxBatchSize });
    this.modelName = options.modelName ?? "agl-policy";
    this.app = this.buildApp();
  }

  get model(): PolicyModel {
    return this.generator.policy;
  }
  get version(): number {
    return this.generator.version;
  }
  /** Base URL of the OpenAI API (`http://host:port/v1`), for `new OpenAI({ baseURL })`. */
  get baseUrl(): string {
    if (!this._url) throw new Error("PolicyServer is not started");
    return `${this._url}/v1`;
  }
  get url(): string {
    if (!this._url) throw new Error("PolicyServer is not started");
    return this._url;
  }

  /** Stop admitting new sequences and resolve when running ones have finished (queued ones wait). */
  pause(): Promise<void> {
    return this.generator.pause();
  }
  resume(): void {
    this.generator.resume();
  }
  /** Drain, apply new weights (a model to copy from, or a callback), bump `version`, resume. */
  swapWeights(apply?: PolicyModel | ((model: PolicyModel) => void | Promise<void>)): Promise<number> {
    return this.generator.swapWeights(apply);
  }

  async start(): Promise<{ url: string; port: number }> {
    if (this.server) return { url: this.url, port: Number(new URL(this.url).port) };
    const host = this.options.host ?? "127.0.0.1";
    const server = await new Promise<ServerType>((resolve, reject) => {
      const s = serve({ fetch: this.app.fetch, hostname: host, port: this.options.port ?? 0 }, () => resolve(s));
      s.once("error", reject);
    });
    this.server = server;
    const port = (server.address() as AddressInfo).port;
    this._url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
    return { url: this._url, port };
  }

  /** Stop accepting connections, let in-flight requests finish (up to `graceMs`), then close sockets. */
  async stop(graceMs = 5000): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    const deadline = Date.now() + graceMs;
    while (this.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    (server as { closeAllConnections?: () => void }).closeAllConnections?.();
    await closed;
    this._url = undefined;
  }

  private buildApp(): Hono {
    const app = new Hono();
    app.onError((err, c) => {
      const e = err instanceof HttpError ? err : new HttpError(500, err instanceof Error ? err.message : String(err));
      return c.json(e.body, e.status);
    });
    app.notFound((c) => c.json(new HttpError(404, `No route ${c.req.method} ${c.req.path}`).body, 404));
    app.get("/health", (c) =>
      c.json({
        status: "ok",
        model: this.modelName,
        version: this.version,
        paused: this.generator.isPaused,
        active: this.generator.activeCount,
        queued: this.generator.queuedCount,
      }),
    );
    app.use("/v1/*", async (c, next) => {
      const key = this.options.apiKey;
      if (key && c.req.header("authorization") !== `Bearer ${key}`) {
        throw new HttpError(401, "Missing or invalid bearer token", null, "invalid_api_key");
      }
      await next();
    });
    app.use(
      "/v1/*",
      bodyLimit({
        maxSize: this.options.bodyLimitBytes ?? 4 * 1024 * 1024,
        onError: (c) => c.json(new HttpError(413, "Request body too large").body, 413),
      }),
    );
    app.get("/v1/models", (c) =>
      c.json({
        object: "list",
        data: [
          {
            id: this.modelName,
            object: "model",
            created: this.created,
            owned_by: "agl",
            max_model_len: this.model.config.contextLength,
            version: this.version,
          },
        ],
      }),
    );
    app.post("/v1/chat/completions", (c) => this.track(() => this.chat(c)));
    app.post("/v1/completions", (c) => this.track(() => this.completions(c)));
    return app;
  }

  private async track(fn: () => Promise<Response>): Promise<Response> {
    this.inflight++;
    try {
      return await fn();
    } finally {
      this.inflight--;
    }
  }

  private async body<S extends z.ZodType>(c: Context, schema: S): Promise<z.infer<S>> {
    let raw: unknown;
    try {
      raw = await c.req.json();
    } catch {
      throw new HttpError(400, "Request body is not valid JSON", null, "invalid_json");
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw zodToHttpError(parsed.error);
    const model = (parsed.data as { model: string }).model;
    if (model !== this.modelName) {
      throw new HttpError(400, `The model "${model}" does not exist; this server serves "${this.modelName}"`, "model", "model_not_found");
    }
    return parsed.data;
  }

  private checkPrompt(ids: number[], param: string): void {
    const ctx = this.model.config.contextLength;
    if (ids.length >= ctx) {
      throw new HttpError(
        400,
        `This model's maximum context length is ${ctx} tokens, but the prompt has ${ids.length} tokens (at least one must be left for the completion)`,
        param,
        "context_length_exceeded",
      );
    }
  }

  private genParams(body: ChatCompletionRequest | CompletionRequest, promptLen: number, maxTokens: number | null | undefined) {
    const room = this.model.config.contextLength - promptLen;
    const stop = body.stop == null ? [] : typeof body.stop === "string" ? [body.stop] : body.stop;
    return {
      // A request for more tokens than fit is clamped; generation ends with finish_reason "length".
      maxTokens: Math.min(maxTokens ?? room, room),
      temperature: body.temperature ?? 1,
      topP: body.top_p ?? 1,
      topK: body.top_k != null && body.top_k > 0 ? body.top_k : 0,
      stop,
      ignoreEos: body.ignore_eos ?? false,
    };
  }

  private signal(c: Context): { signal: AbortSignal; timedOut: () => boolean } {
    const timeout = AbortSignal.timeout(this.options.requestTimeoutMs ?? 300_000);
    return { signal: AbortSignal.any([c.req.raw.signal, timeout]), timedOut: () => timeout.aborted };
  }

  private requests(n: number, base: Omit<GenerateRequest, "seed">, seed: number | null | undefined, onToken?: (i: number, e: TokenEvent) => void) {
    return Array.from({ length: n }, (_, i) => ({
      ...base,
      seed: seed == null ? undefined : seed + i,
      onToken: onToken ? (e: TokenEvent) => onToken(i, e) : undefined,
    }));
  }

  private async chat(c: Context): Promise<Response> {
    const body = await this.body(c, ChatCompletionRequestSchema);
    let encoded: { ids: number[] };
    try {
      encoded = this.template.encodeChat(body.messages as never, (body.tools ?? undefined) as never);
    } catch (error) {
      if (InvalidArgumentError.isInstance(error)) throw new HttpError(400, error.message, error.field, "invalid_value");
      throw error;
    }
    const promptIds = encoded.ids;
    this.checkPrompt(promptIds, "messages");
    const parseTools = (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none";
    const topK = body.logprobs ? (body.top_logprobs ?? 0) : 0;
    const { signal, timedOut } = this.signal(c);
    const base = { ...this.genParams(body, promptIds.length, body.max_completion_tokens ?? body.max_tokens), promptIds, signal, topLogprobs: topK };
    const n = body.n ?? 1;
    const id = newId("chatcmpl");
    const created = nowSec();
    const withIds = body.return_token_ids === true;

    if (!body.stream) {
      const results = await this.generator.generateMany(this.requests(n, base, body.seed));
      if (timedOut()) throw new HttpError(504, "Generation timed out", null, "timeout");
      c.header("x-agl-model-version", String(results[0]?.modelVersion ?? this.version));
      const choices = results.map((result, index) => {
        const { message, finishReason } = assistantMessage(result, parseTools);
        return {
          index,
          message,
          finish_reason: finishReason,
          logprobs: body.logprobs ? { content: chatLogprobs(this.tokenizer, result.tokens) } : null,
          ...(withIds ? { token_ids: result.tokenIds } : {}),
        };
      });
      const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
      return c.json({
        id,
        object: "chat.completion",
        created,
        model: this.modelName,
        system_fingerprint: `agl-policy-v${results[0]?.modelVersion ?? this.version}`,
        choices,
        usage: { prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion },
        ...(withIds ? { prompt_token_ids: promptIds } : {}),
      });
    }

    return streamSSE(c, async (stream) => {
      let fingerprint = `agl-policy-v${this.version}`;
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
        id,
        object: "chat.completion.chunk",
        created,
        model: this.modelName,
        system_fingerprint: fingerprint,
        choices,
        ...extra,
      });
      const queue: unknown[] = [];
      let wake: (() => void) | undefined;
      const push = (x: unknown) => {
        queue.push(x);
        wake?.();
      };
      // Text after the first tool-call marker is held until the end, when we know if it parses.
      const streamed = Array.from({ length: n }, () => ({ text: "", holding: false }));
      const started = new Array<boolean>(n).fill(false);
      const onToken = (i: number, e: TokenEvent) => {
        if (!started[i]) {
          // The first event comes after admission, so the version is the one generating this request.
          started[i] = true;
          fingerprint = `agl-policy-v${this.version}`;
          const role = { index: i, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null };
          push(chunk([role], withIds && !started.some((x, j) => x && j !== i) ? { prompt_token_ids: promptIds } : {}));
        }
        const s = streamed[i] as { text: string; holding: boolean };
        let content = "";
        if (!s.holding) {
          const at = parseTools ? e.textDelta.indexOf(TOOL_CALL_OPEN) : -1;
          content = at >= 0 ? e.textDelta.slice(0, at) : e.textDelta;
          if (at >= 0) s.holding = true;
          s.text += content;
        }
        if (!e.token && content === "") return;
        const choice: Record<string, unknown> = { index: i, delta: content ? { content } : {}, finish_reason: null };
        choice.logprobs = body.logprobs && e.token ? { content: chatLogprobs(this.tokenizer, [e.token]) } : null;
        if (withIds) choice.token_ids = e.token ? [e.token.id] : [];
        push(chunk([choice]));
      };
      let done = false;
      const finished = this.generator.generateMany(this.requests(n, base, body.seed, onToken)).then(
        (results) => {
          results.forEach((result, i) => {
            const { message, finishReason } = assistantMessage(result, parseTools);
            const s = streamed[i] as { text: string };
            const delta: Record<string, unknown> = {};
            const rest = (message.content ?? "").slice(s.text.length);
            if (rest) delta.content = rest;
            if (message.tool_calls) {
              delta.tool_calls = message.tool_calls.map((call, index) => ({ index, ...call }));
            }
            push(chunk([{ index: i, delta, logprobs: null, finish_reason: finishReason }]));
          });
          if (body.stream_options?.include_usage) {
            const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
            push(chunk([], { usage: { prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion } }));
          }
        },
        (error) => push({ error: { message: error instanceof Error ? error.message : String(error), type: "server_error" } }),
      );
      void finished.finally(() => {
        done = true;
        wake?.();
      });
      await this.pump(stream, queue, () => done, (w) => {
        wake = w;
      });
    });
  }

  private async pump(
    stream: { writeSSE: (m: { data: string }) => Promise<void>; aborted: boolean },
    queue: unknown[],
    isDone: () => boolean,
    setWake: (w: (() => void) | undefined) => void,
  ): Promise<void> {
    for (;;) {
      while (queue.length > 0) {
        if (stream.aborted) return;
        await stream.writeSSE({ data: JSON.stringify(queue.shift()) });
      }
      if (isDone()) break;
      await new Promise<void>((resolve) => setWake(resolve));
      setWake(undefined);
    }
    if (!stream.aborted) await stream.writeSSE({ data: "[DONE]" });
  }

  private promptIds(body: CompletionRequest): number[] {
    const p = body.prompt;
    const V = this.tokenizer.vocabSize;
    if (typeof p === "string") return this.tokenizer.encode(p);
    const first = p[0];
    if (typeof first === "string") return this.tokenizer.encode(first);
    const ids = (Array.isArray(first) ? first : p) as number[];
    const bad = ids.findIndex((x) => x < 0 || x >= V);
    if (bad >= 0) throw new HttpError(400, `Token id ${ids[bad]} at prompt[${bad}] is outside the vocabulary [0, ${V})`, "prompt", "invalid_value");
    return ids;
  }

  private async completions(c: Context): Promise<Response> {
    const body = await this.body(c, CompletionRequestSchema);
    const promptIds = this.promptIds(body);
    if (promptIds.length === 0) throw new HttpError(400, "The prompt is empty", "prompt", "invalid_value");
    this.checkPrompt(promptIds, "prompt");
    const { signal, timedOut } = this.signal(c);
    const wantLogprobs = body.logprobs != null;
    const base = {
      ...this.genParams(body, promptIds.length, body.max_tokens ?? 16),
      promptIds,
      signal,
      topLogprobs: body.logprobs ?? 0,
    };
    const n = body.n ?? 1;
    const id = newId("cmpl");
    const created = nowSec();
    const withIds = body.return_token_ids === true;

    if (!body.stream) {
      const results = await this.generator.generateMany(this.requests(n, base, body.seed));
      if (timedOut()) throw new HttpError(504, "Generation timed out", null, "timeout");
      c.header("x-agl-model-version", String(results[0]?.modelVersion ?? this.version));
      const choices: Array<Record<string, unknown>> = results.map((result, index) => ({
        index,
        text: result.text,
        finish_reason: completionFinishReason(result),
        logprobs: wantLogprobs ? completionLogprobs(this.tokenizer, result.tokens) : null,
        ...(withIds ? { prompt_token_ids: promptIds, token_ids: result.tokenIds } : {}),
      }));
      const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
      return c.json({
        id,
        object: "text_completion",
        created,
        model: this.modelName,
        system_fingerprint: `agl-policy-v${results[0]?.modelVersion ?? this.version}`,
        choices,
        usage: { prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion },
      });
    }

    return streamSSE(c, async (stream) => {
      let fingerprint = `agl-policy-v${this.version}`;
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
        id,
        object: "text_completion",
        created,
        model: this.modelName,
        system_fingerprint: fingerprint,
        choices,
        ...extra,
      });
      const queue: unknown[] = [];
      let wake: (() => void) | undefined;
      const push = (x: unknown) => {
        queue.push(x);
        wake?.();
      };
      const first = new Array<boolean>(n).fill(true);
      const offsets = new Array<number>(n).fill(0);
      const onToken = (i: number, e: TokenEvent) => {
        if (first.every((f) => f)) fingerprint = `agl-policy-v${this.version}`;
        const choice: Record<string, unknown> = { index: i, text: e.textDelta, finish_reason: null };
        choice.logprobs = wantLogprobs && e.token ? completionLogprobs(this.tokenizer, [e.token], offsets[i]) : null;
        offsets[i] = (offsets[i] as number) + e.textDelta.length;
        if (withIds) {
          choice.token_ids = e.token ? [e.token.id] : [];
          if (first[i]) choice.prompt_token_ids = promptIds;
        }
        first[i] = false;
        push(chunk([choice]));
      };
      let done = false;
      const finished = this.generator.generateMany(this.requests(n, base, body.seed, onToken)).then(
        (results) => {
          results.forEach((result, i) => push(chunk([{ index: i, text: "", logprobs: null, finish_reason: completionFinishReason(result) }])));
          if (body.stream_options?.include_usage) {
            const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
            push(chunk([], { usage: { prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion } }));
          }
        },
        (error) => push({ error: { message: error instanceof Error ? error.message : String(error), type: "server_error" } }),
      );
      void finished.finally(() => {
        done = true;
        wake?.();
      });
      await this.pump(stream, queue, () => done, (w) => {
        wake = w;
      });
    });
  }
}
