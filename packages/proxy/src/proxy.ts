import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  generateTokenSecret,
  getLogger,
  type LLM,
  type ProxyLLM,
  proxyLLM,
  proxyLLMBaseUrl,
  redactSecrets,
} from "@agl/core";
import { getRequestListener } from "@hono/node-server";
import { Authenticator } from "./auth.js";
import { BackendPool, type BackendState } from "./backends.js";
import type { CaptureCounters } from "./call-recorder.js";
import { createControlApp } from "./control-app.js";
import { readBody, sendJson } from "./http-util.js";
import { LLMCallHandler } from "./llm-handler.js";
import {
  checkModelVersion,
  type LLMProxyOptions,
  type ProxyLogger,
  type ResolvedProxyOptions,
  resolveOptions,
} from "./options.js";
import { PauseGate, type PauseOptions, type PauseState } from "./pause.js";
import { RelayHub } from "./relay/relay-hub.js";
import { matchLLMRoute } from "./routes.js";
import { type SessionRecord, SessionRegistry } from "./sessions.js";
import { SpanWriter } from "./span-writer.js";

// The process-wide agl logger (pino when the agl-proxy CLI installed it, else console); secrets redacted.
const processLogger: ProxyLogger = {
  warn: (m) => getLogger().warn(redactSecrets(m)),
  error: (m) => getLogger().error(redactSecrets(m)),
};

/**
 * An OpenAI-compatible gateway in front of vLLM-like upstreams that records every call, with the engine's
 * exact token ids and logprobs, as a span in a LightningStore. See README.md for routes and the span format.
 */
export class LLMProxy {
  readonly options: ResolvedProxyOptions;
  private readonly pool: BackendPool;
  private readonly gate: PauseGate;
  private readonly auth: Authenticator;
  private readonly secret: string;
  private readonly sessions = new SessionRegistry();
  private readonly handler: LLMCallHandler;
  private readonly log: ProxyLogger;
  /** Relay mode's worker endpoint; null without `relay`. */
  private readonly relay: RelayHub | null;
  private server: Server | null = null;
  private baseUrl: string | null = null;

  constructor(options: LLMProxyOptions) {
    this.options = resolveOptions(options);
    const o = this.options;
    this.log = o.logger ?? processLogger;
    this.pool = new BackendPool(o.backends, {
      allowedFailures: o.allowedFailures,
      cooldownMs: o.cooldownMs,
      healthCheckIntervalMs: o.healthCheckIntervalMs,
      healthCheckTimeoutMs: o.healthCheckTimeoutMs,
      onWarning: (m) => this.log.warn(m),
      allowEmpty: o.relay !== null,
    });
    this.relay = o.relay ? new RelayHub(o.relay, this.pool, this.log) : null;
    this.gate = new PauseGate({
      mode: o.pauseMode,
      retryAfterSeconds: o.retryAfterSeconds,
      maxHoldMs: o.maxHoldMs,
      modelVersion: o.modelVersion,
    });
    // Generated here (not inside the issuer) so it can be read back and handed to runners.
    this.secret = o.tokenSecret ?? generateTokenSecret();
    this.auth = new Authenticator(o.adminToken, o.llmAuth, this.secret);
    this.handler = new LLMCallHandler(
      o,
      new SpanWriter(o.store, this.log),
      this.pool,
      this.gate,
      this.auth,
      this.sessions,
      this.log,
      this.relay ? (ms) => this.relay!.waitForWorker(ms) : null,
    );
    if (o.modes.train.temperature !== null && o.modes.train.temperature !== 1 && o.modes.train.logprobs) {
      this.log.warn(`train temperature is ${o.modes.train.temperature} ≠ 1 while raw logprobs are recorded`);
    }
  }

  /** Listen; resolves with the base URL (without /v1). */
  async start(): Promise<string> {
    if (this.server) return this.url;
    const o = this.options;
    if (o.adminToken === null) {
      this.log.warn("no admin token: the control routes (/proxy/pause, /proxy/resume, /sessions) are open");
    }
    const control = getRequestListener(
      createControlApp({
        auth: this.auth,
        pool: this.pool,
        gate: this.gate,
        sessions: this.sessions,
        captureCounters: () => this.handler.captureCounters,
        flush: () => this.flush(),
        maxBodyBytes: o.maxBodyBytes,
        pause: (p) => this.pause(p),
        resume: (r) => this.resume(r),
        mintAttemptToken: (r, a, t) => this.mintAttemptToken(r, a, t),
      }).fetch,
    );
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const match = matchLLMRoute(req.url ?? "/");
      if (match === null) {
        if (req.method === "GET" || req.method === "HEAD") {
          void control(req, res);
          return;
        }
        // Read here (the control bodies are small) so an over-limit one is answered 413 only once the
        // client has sent it: hono's own limit answers mid-upload and leaves the rest unread on a
        // keep-alive socket, which breaks the client's next request.
        void readBody(req, res, o.maxBodyBytes, { detail: "request body too large" }).then((body) => {
          if (body === null) return;
          // @hono/node-server reads `rawBody` instead of the (consumed) stream
          (req as IncomingMessage & { rawBody?: Buffer }).rawBody = body;
          void control(req, res);
        });
        return;
      }
      this.handler.handle(req, res, match).catch((error) => {
        this.log.error(`request failed: ${(error as Error).stack ?? error}`);
        if (!res.headersSent)
          sendJson(res, 500, { error: { message: "internal proxy error", type: "server_error" } });
        else res.destroy();
      });
    });
    if (this.relay) {
      const relay = this.relay;
      server.on("upgrade", (req, socket, head) => relay.handleUpgrade(req, socket, head));
    }
    // receiving the request is bounded; the response may stream for as long as the model generates
    server.requestTimeout = 60_000;
    server.headersTimeout = 30_000;
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(o.port, o.host, () => {
        server.off("error", reject);
        resolve();
      });
    });
    this.server = server;
    const { port } = server.address() as AddressInfo;
    const host = o.host.includes(":") ? `[${o.host}]` : o.host === "0.0.0.0" ? "127.0.0.1" : o.host;
    this.baseUrl = `http://${host}:${port}`;
    this.pool.startHealthChecks();
    return this.baseUrl;
  }

  /** Stop accepting, let in-flight calls finish (up to the grace period), flush spans, close. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    this.gate.releaseHeld();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    try {
      await this.gate.drain(this.options.shutdownGraceMs);
    } catch {
      this.log.warn(`stopping with ${this.gate.inflight} call(s) still in flight`);
    }
    await this.relay?.close();
    server.closeAllConnections();
    await closed;
    await this.flush();
    await this.pool.stop();
  }

  /** Ids of the relay workers connected now (relay mode). */
  get relayWorkers(): string[] {
    return this.relay?.connectedWorkers ?? [];
  }

  get url(): string {
    if (!this.baseUrl) throw new Error("the proxy is not started");
    return this.baseUrl;
  }

  /** The base URL published to agents: the `publicUrl` option, else the bound address (`url`). */
  get publicUrl(): string {
    return this.options.publicUrl?.replace(/\/+$/, "") ?? this.url;
  }

  /** Wait until every recorded call's span has been handed to the store. */
  async flush(): Promise<void> {
    while (this.handler.pendingWrites.size) await Promise.all([...this.handler.pendingWrites]);
  }

  /**
   * Pause for a weight update. With `drain`, resolves once in-flight calls have finished and their spans
   * are written; new calls get 429 + Retry-After ("reject") or wait for resume ("hold").
   */
  async pause(options: PauseOptions = {}): Promise<PauseState> {
    const state = await this.gate.pause(options);
    if (!options.drain) return state;
    await this.flush();
    return this.gate.state();
  }

  /** Resume; `modelVersion` (e.g. the new policy version) is recorded on later spans. */
  async resume(options: { modelVersion?: string | number | null } = {}): Promise<PauseState> {
    if (options.modelVersion !== undefined) checkModelVersion(options.modelVersion, "resume.modelVersion");
    return this.gate.resume(options);
  }

  /** Pause state, capture counters (spans recorded / lost) and backends. */
  state(): PauseState & CaptureCounters & { backends: BackendState[] } {
    return {
      ...this.gate.state(),
      ...this.handler.captureCounters,
      backends: this.pool.backends.map((b) => b.state()),
    };
  }

  /**
   * Ask every backend for `model` from now on (the rewrite target of later calls), e.g. the LoRA adapter
   * an inference engine serves the new policy version under. Calls already forwarded keep theirs: pause
   * with `drain` first so none straddles the change.
   */
  setBackendModel(model: string): void {
    if (typeof model !== "string" || model.length === 0)
      throw new Error("setBackendModel needs a model name");
    for (const backend of this.pool.backends) backend.model = model;
  }

  /**
   * Ask the backends for `model` for calls naming `name` (a policy route), e.g. the adapter an engine
   * serves that policy's new version under. Pause with `drain` first so no call straddles the change.
   */
  setPolicyModel(name: string, model: string): void {
    const route = this.options.policies[name];
    if (!route) throw new Error(`setPolicyModel: no policy route "${name}"`);
    if (typeof model !== "string" || model.length === 0) throw new Error("setPolicyModel needs a model name");
    route.model = model;
  }

  get modelVersion(): string | number | null {
    return this.gate.modelVersion;
  }

  set modelVersion(version: string | number | null) {
    this.gate.modelVersion = checkModelVersion(version);
  }

  /**
   * The HMAC secret of per-attempt tokens (the `tokenSecret` option, or the one generated at
   * construction). Give it to runners (`Runner`/`Trainer` option `proxyTokenSecret`, `agl-worker
   * --proxy-token-secret`) so they mint tokens this proxy accepts. Anyone holding it can mint a token
   * for any attempt: treat it like the admin token.
   */
  get tokenSecret(): string {
    return this.secret;
  }

  /** A token that only allows this attempt's LLM calls (and reading its own session). */
  mintAttemptToken(
    rolloutId: string,
    attemptId: string,
    options: { ttlSeconds?: number | null } = {},
  ): string {
    return this.auth.tokens.mint(rolloutId, attemptId, options);
  }

  /**
   * The `proxy_llm` resource to publish. The runner's per-attempt resolution (`resolveForAttempt` in
   * @agl/core) turns it into `{url}/rollout/{rid}/attempt/{aid}/v1`.
   */
  asResource(
    options: { model?: string; samplingParameters?: Record<string, unknown>; apiKey?: string | null } = {},
  ): ProxyLLM {
    const model = options.model ?? this.options.model ?? this.pool.backends[0]?.model;
    if (!model)
      throw new Error("asResource needs a model name (pass { model } or configure the proxy's model)");
    const temperature = options.samplingParameters?.temperature;
    if (typeof temperature === "number" && temperature !== 1 && this.options.logprobs) {
      this.log.warn(`resource temperature ${temperature} ≠ 1 while raw logprobs are recorded`);
    }
    return proxyLLM({
      endpoint: `${this.publicUrl}/v1`,
      model,
      api_key: options.apiKey ?? null,
      sampling_parameters: options.samplingParameters ?? {},
    });
  }

  /** The LLM one attempt uses, with a token scoped to it (what to hand an agent when tokens are required). */
  resolveForAttempt(
    resource: ProxyLLM,
    rolloutId: string,
    attemptId: string,
    options: { ttlSeconds?: number | null } = {},
  ): LLM {
    return {
      resource_type: "llm",
      endpoint: proxyLLMBaseUrl(resource, rolloutId, attemptId),
      model: resource.model,
      api_key: this.mintAttemptToken(rolloutId, attemptId, options),
      sampling_parameters: { ...resource.sampling_parameters },
    };
  }

  /** Bind a verl-style session to a rollout attempt (POST /sessions/{id} does the same over HTTP). */
  createSession(sessionId: string, binding: { rolloutId?: string; attemptId?: string } = {}): SessionRecord {
    return this.sessions.create(sessionId, binding);
  }

  getSession(sessionId: string): SessionRecord | undefined {
    return this.sessions.get(sessionId);
  }
}
