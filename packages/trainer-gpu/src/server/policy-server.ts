import type { AddressInfo } from "node:net";
import { InvalidArgumentError } from "@agl/core";
import { type ServerType, serve } from "@hono/node-server";
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { GenerationEngine } from "../generate/engine.js";
import { Generator } from "../generate/generator.js";
import { modelSamplingDefaults, type SamplingDefaults } from "../generate/sampling-defaults.js";
import type { CausalLM } from "../model/causal-lm.js";
import { checkpointModelName } from "../pretrained/load.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { ServedModels } from "./adapters-registry.js";
import { chatCompletion } from "./chat-route.js";
import { completion } from "./completions-route.js";
import { nowSec, RouteContext } from "./route-context.js";
import { HttpError } from "./schemas.js";
import { updateWeightsFromDisk, type WeightsLoader, WeightsUpdater } from "./weights-route.js";

export interface PolicyServerOptions<G extends GenerationEngine = Generator> {
  model: CausalLM;
  /** The character-level `Tokenizer` or a checkpoint's `HfTokenizer`. */
  tokenizer: TextTokenizer;
  /** Required with an `HfTokenizer` (the checkpoint's `HfChatTemplate`); default `new ChatTemplate(tokenizer)`. */
  template?: ChatEncoder;
  /**
   * Share a generator (e.g. with in-process sampling) or pass another engine (`PooledGenerator`: generation
   * on worker threads); a `Generator` is created from model/tokenizer when absent.
   */
  generator?: G;
  /**
   * The model id clients must send. Default: a loaded Hugging Face checkpoint's name (`_name_or_path`, else
   * its folder name), otherwise "agl-policy".
   */
  modelName?: string;
  /**
   * Further served names over the same weights (vLLM's `--lora-modules`): name → the model's LoRA adapter
   * its requests run with (`null`: the base weights alone). Default: every named adapter of a
   * multi-adapter `PretrainedModel` under its own name. Requests for different names batch together.
   */
  adapters?: Readonly<Record<string, string | null>>;
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
  /**
   * Sampling parameters for requests that leave them out (vLLM's `--generation-config`): default the
   * model's `generation_config.json` (`temperature`, `top_p`, `top_k`, `do_sample: false` = greedy,
   * `max_new_tokens` as a max_tokens ceiling); `{}` for vLLM's neutral defaults (`--generation-config vllm`).
   */
  samplingDefaults?: SamplingDefaults;
  /**
   * Enables `POST /update_weights_from_disk {"model_path"}` (SGLang's route, behind `apiKey` like the
   * API): load the checkpoint a trainer wrote there and serve it as the next version, so this server can
   * run in its own process as PPO's external engine (see weights-route.ts). With a `VersionedEngine` as
   * `generator` the switch does not stop generation.
   */
  loadWeights?: WeightsLoader;
}

/**
 * An OpenAI-compatible server for a CausalLM (chat + completions, streaming, tools, vLLM token ids and
 * logprobs), backed by the dynamic-batching Generator.
 *
 * Weight updates: `swapWeights()` pauses admission, waits for running sequences to finish (requests that
 * arrive meanwhile queue; nothing is dropped), applies the new weights, increments `version` and resumes.
 * Every response reports the version that produced it in `system_fingerprint` ("agl-policy-v<N>") and the
 * `x-agl-model-version` header; the `n` choices of one request always share one version. Exception, by
 * request: a `VersionedEngine` with `inFlight: "resume"` resumes non-streamed requests in flight on a newly
 * published version; the header then names the version that finished them and `x-agl-model-version-start`
 * the one they started on.
 */
export class PolicyServer<G extends GenerationEngine = Generator> {
  readonly generator: G;
  readonly tokenizer: TextTokenizer;
  readonly template: ChatEncoder;
  readonly modelName: string;
  /** Every served name (the primary one first) and the adapter it runs with. */
  readonly models: ServedModels;
  readonly app: Hono;
  private readonly options: PolicyServerOptions<G>;
  private server: ServerType | undefined;
  private _url: string | undefined;
  private inflight = 0;
  private readonly created = nowSec();
  private readonly routes: RouteContext;

  constructor(options: PolicyServerOptions<G>) {
    this.options = options;
    this.tokenizer = options.tokenizer;
    this.template = options.template ?? defaultTemplate(options.tokenizer);
    this.generator =
      options.generator ??
      // Without an engine of its own the server's is the default Generator (G's default).
      (new Generator(options.model, options.tokenizer, {
        maxBatchSize: options.maxBatchSize,
      }) as unknown as G);
    this.modelName = options.modelName ?? defaultModelName(options.model);
    this.models = new ServedModels(this.modelName, this.generator.policy, options.adapters);
    this.routes = new RouteContext(
      this.generator,
      this.tokenizer,
      this.template,
      this.models,
      options.requestTimeoutMs ?? 300_000,
      options.samplingDefaults ?? modelSamplingDefaults(options.model),
    );
    this.app = this.buildApp();
  }

  get model(): CausalLM {
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
  /** Resume admission; `weightsChanged: true` (after an in-place update) increments `version`. */
  resume(options: { weightsChanged?: boolean } = {}): void {
    this.generator.resume(options);
  }
  /** Drain, apply new weights (a model to copy from, or a callback), bump `version`, resume. */
  swapWeights(apply?: CausalLM | ((model: CausalLM) => void | Promise<void>)): Promise<number> {
    return this.generator.swapWeights(apply);
  }

  async start(): Promise<{ url: string; port: number }> {
    if (this.server) return { url: this.url, port: Number(new URL(this.url).port) };
    const host = this.options.host ?? "127.0.0.1";
    const server = await new Promise<ServerType>((resolve, reject) => {
      const s = serve({ fetch: this.app.fetch, hostname: host, port: this.options.port ?? 0 }, () =>
        resolve(s),
      );
      s.once("error", reject);
    });
    // Node closes idle keep-alive sockets after 5 s, and a client (undici, the openai SDK) reusing one at
    // that moment gets ECONNRESET. Generation and training block this event loop for seconds, so the close
    // fires late and lands on the next request; a long idle timeout leaves closing idle sockets to clients.
    (server as unknown as { keepAliveTimeout: number }).keepAliveTimeout = 65_000;
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
      const e = HttpError.isInstance(err)
        ? err
        : new HttpError(500, err instanceof Error ? err.message : String(err));
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
    const auth: MiddlewareHandler = async (c, next) => {
      const key = this.options.apiKey;
      if (key && c.req.header("authorization") !== `Bearer ${key}`) {
        throw new HttpError(401, "Missing or invalid bearer token", null, "invalid_api_key");
      }
      await next();
    };
    app.use("/v1/*", auth);
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
        // vLLM lists adapters with `parent` = the base's served name.
        data: this.models.list().map((m) => ({
          id: m.name,
          object: "model",
          created: this.created,
          owned_by: "agl",
          root: m.adapter ? m.adapter : this.modelName,
          parent: m.name === this.modelName ? null : this.modelName,
          max_model_len: this.model.config.contextLength,
          version: this.version,
        })),
      }),
    );
    app.post("/v1/chat/completions", (c) => this.track(() => chatCompletion(this.routes, c)));
    app.post("/v1/completions", (c) => this.track(() => completion(this.routes, c)));
    if (this.options.loadWeights) {
      const updater = new WeightsUpdater(this.generator, this.options.loadWeights);
      app.post(
        "/update_weights_from_disk",
        auth,
        bodyLimit({
          maxSize: 64 * 1024,
          onError: (c) => c.json(new HttpError(413, "Request body too large").body, 413),
        }),
        (c) => updateWeightsFromDisk(updater, c),
      );
    }
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
}

function defaultTemplate(tokenizer: TextTokenizer): ChatEncoder {
  if (tokenizer instanceof Tokenizer) return new ChatTemplate(tokenizer);
  throw new InvalidArgumentError(
    "template",
    "pass the checkpoint's chat template with a non-character tokenizer",
  );
}

/** A loaded checkpoint's name (`_name_or_path`, else its folder name), else `fallback`. */
export function defaultModelName(model: CausalLM, fallback = "agl-policy"): string {
  if (model instanceof PretrainedModel && model.sourceDir)
    return checkpointModelName(model.rawConfig, model.sourceDir);
  return fallback;
}
