import type { IncomingMessage, ServerResponse } from "node:http";
import { bodyNestsTooDeep, MAX_BODY_NESTING_DEPTH } from "@agl/core";
import { AttemptDirectory } from "./attempt-directory.js";
import { AttemptLiveness } from "./attempt-liveness.js";
import { type Attribution, Attributor } from "./attribution.js";
import { AuthError, type Authenticator } from "./auth.js";
import type { BackendPool } from "./backends.js";
import { CallRecorder, type CaptureCounters, type PendingCall } from "./call-recorder.js";
import { newSpanId } from "./capture.js";
import {
  anthropicError,
  type ClientDialect,
  DialectRequestError,
  ResponseHistory,
  ResponseStateUnavailableError,
  type SpanLookup,
  translateClientRequest,
} from "./dialects/index.js";
import { errorBodyFor } from "./error-bodies.js";
import { forwardCall } from "./forward.js";
import { header, openaiError, readBody, sendJson } from "./http-util.js";
import type { ProxyLogger, ResolvedProxyOptions } from "./options.js";
import type { PauseGate } from "./pause.js";
import { applyResourceSampling, ResourceSampling } from "./resource-sampling.js";
import { rewriteRequest, UpstreamRequest } from "./rewrite.js";
import type { RouteMatch } from "./routes.js";
import type { SessionRegistry } from "./sessions.js";
import type { SpanWriter } from "./span-writer.js";
import { callUpstream, collectBody } from "./upstream.js";

const now = () => performance.timeOrigin + performance.now();

/**
 * The proxied LLM calls, in order: attribution (attribution.ts), the unknown-attempt check
 * (attempt-directory.ts), the pause gate, rewrites (rewrite.ts), upstream with failover and the answer to
 * the client (forward.ts), and the span (call-recorder.ts).
 */
export class LLMCallHandler {
  private readonly recorder: CallRecorder;
  private readonly attributor: Attributor;
  /** Null when the store cannot look attempts up, or checks are off: every attribution is taken as is. */
  private readonly directory: AttemptDirectory | null;
  /** `/v1/responses` conversations for `previous_response_id`, per attempt (the store is their record). */
  private readonly history: ResponseHistory;
  /** Null when the store cannot look attempts up: scoped tokens then end only at their expiry. */
  private readonly liveness: AttemptLiveness | null;
  /** Null when off or the store cannot read resources: calls keep their own sampling parameters. */
  private readonly sampling: ResourceSampling | null;

  constructor(
    private readonly o: ResolvedProxyOptions,
    private readonly writer: SpanWriter,
    private readonly pool: BackendPool,
    private readonly gate: PauseGate,
    private readonly auth: Authenticator,
    sessions: SessionRegistry,
    log: ProxyLogger,
    /** Relay mode: wait (up to ms) for a worker when no backend is connected; resolves whether one is. */
    private readonly waitForBackend: ((ms: number) => Promise<boolean>) | null = null,
  ) {
    this.recorder = new CallRecorder(writer, sessions, o, log);
    this.attributor = new Attributor(o.traceHeader, auth, sessions);
    this.directory = o.unknownAttempts === "reject" ? AttemptDirectory.for(o.store, log) : null;
    this.liveness = AttemptLiveness.for(o.store, log);
    this.sampling = o.resourceSampling ? ResourceSampling.for(o.store, log) : null;
    const spans = o.store as Partial<SpanLookup>;
    this.history = new ResponseHistory({
      maxBytes: o.responseCacheBytes,
      store: typeof spans.querySpans === "function" ? (spans as SpanLookup) : null,
      waitMs: o.responseStateWaitMs,
      log,
    });
  }

  /** Span writes not yet settled; stop() and flush() wait for them. */
  get pendingWrites(): Set<Promise<unknown>> {
    return this.recorder.pendingWrites;
  }

  get captureCounters(): CaptureCounters {
    return this.recorder.counters();
  }

  async handle(req: IncomingMessage, res: ServerResponse, match: RouteMatch): Promise<void> {
    const startMs = now();
    // before the body is parsed, errors already speak the route's API (Anthropic's shape on /v1/messages)
    const errorBody = errorBodyFor(match.op);
    const fail = (status: number, message: string, type: string, code: string | null = null) =>
      sendJson(res, status, errorBody(status, message, type, code));
    let attribution: Attribution | null;
    try {
      attribution = this.attributor.attribute(req, match);
    } catch (error) {
      if (error instanceof AuthError) return fail(error.status, error.message, "authentication_error");
      throw error;
    }
    if (match.op === "models") {
      if (req.method !== "GET") return fail(405, "use GET", "invalid_request_error");
      return this.models(res);
    }
    if (req.method !== "POST") return fail(405, "use POST", "invalid_request_error");
    if (!attribution && this.o.unattributed === "reject") {
      return fail(400, "this call is not attributed to a rollout attempt", "invalid_request_error");
    }
    // a scoped token works only while its attempt runs: asked now, answered while the body arrives
    const liveness =
      attribution && this.liveness && this.auth.identify(req.headers).kind === "attempt"
        ? this.liveness.blockedStatus(attribution.rolloutId, attribution.attemptId, startMs)
        : null;

    const limit = this.o.maxBodyBytes;
    const raw = await readBody(
      req,
      res,
      limit,
      errorBody(413, `request body over ${limit} bytes`, "invalid_request_error", null),
    );
    if (raw === null) return;
    // Scanned on the bytes, before any copy or parse: parsing `[[[[…` builds every array first, over a
    // gigabyte for a 16 MB body, only to be refused afterwards.
    if (bodyNestsTooDeep(raw, MAX_BODY_NESTING_DEPTH)) {
      return fail(
        400,
        `request body nests arrays/objects deeper than ${MAX_BODY_NESTING_DEPTH} levels`,
        "invalid_request_error",
      );
    }
    let body: Record<string, any>;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      return fail(400, "request body is not valid JSON", "invalid_request_error");
    }
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      return fail(400, "request body must be a JSON object", "invalid_request_error");
    }
    const blocked = liveness && (await liveness);
    if (blocked) {
      return fail(
        403,
        `attempt ${attribution!.attemptId} of rollout ${attribution!.rolloutId} is no longer running (${blocked}); its token no longer works`,
        "authentication_error",
        "attempt_finished",
      );
    }
    let dialect: ClientDialect | null = null;
    const spanId = newSpanId();
    if (match.op === "responses" || match.op === "messages") {
      // served by translation to the upstream's chat/completions: one chat span, the same triplets
      const scope = attribution
        ? { rolloutId: attribution.rolloutId, attemptId: attribution.attemptId }
        : null;
      try {
        const translated = await translateClientRequest(match.op, body, this.history, scope, spanId);
        body = translated.chat;
        dialect = translated.dialect;
      } catch (error) {
        if (error instanceof ResponseStateUnavailableError) {
          return fail(503, error.message, "server_error", "store_unavailable");
        }
        if (!(error instanceof DialectRequestError)) throw error;
        return sendJson(
          res,
          400,
          match.op === "messages"
            ? anthropicError(400, error.message)
            : openaiError(error.message, "invalid_request_error", "invalid_value", error.param),
        );
      }
    }
    if (attribution?.explicit && this.directory) {
      const { rolloutId: rid, attemptId: aid } = attribution;
      const known = this.directory.cached(rid, aid) ?? (await this.directory.exists(rid, aid));
      if (!known) {
        // Agent Lightning v1.0 answers 404 too; forwarding would lose the span to the store's rejection
        return fail(404, `rollout ${rid} has no attempt ${aid}`, "invalid_request_error", "unknown_attempt");
      }
    }

    if (!this.gate.tryEnter()) {
      const entered = await this.gate.enter();
      if (!entered.ok) {
        return sendJson(
          res,
          429,
          { error: "gateway paused", reason: entered.reason },
          { "retry-after": String(Math.ceil(entered.retryAfterSeconds)), "x-agl-paused": "true" },
        );
      }
    }
    const isChat = match.op !== "completions";
    const clientModel = body.model;
    const policies = this.o.policies;
    const route = typeof clientModel === "string" ? policies[clientModel] : undefined;
    if (!route && Object.keys(policies).length > 0 && clientModel !== this.o.model) {
      this.gate.leave();
      const names = [...Object.keys(policies), ...(this.o.model ? [this.o.model] : [])].join(", ");
      return sendJson(
        res,
        404,
        openaiError(
          `The model \`${String(clientModel)}\` does not exist; this proxy routes: ${names}`,
          "invalid_request_error",
          "model_not_found",
          "model",
        ),
      );
    }
    if (attribution && this.sampling) {
      const params = await this.sampling.parametersFor(attribution.rolloutId);
      if (params) applyResourceSampling(body, params);
    }
    const warning = rewriteRequest(body, isChat, attribution?.mode ?? null, this.o);
    if (warning) this.recorder.warnOnce(warning.key, warning.message);
    const stream = body.stream === true;
    // the sequence id is allocated while the upstream works, off the critical path
    const seq = attribution ? this.writer.nextSequenceId(attribution.rolloutId, attribution.attemptId) : null;
    const record: PendingCall | null = attribution
      ? {
          rolloutId: attribution.rolloutId,
          attemptId: attribution.attemptId,
          sequenceId: 0,
          style: attribution.style,
          mode: attribution.mode,
          sessionId: attribution.sessionId,
          isChat,
          clientApi: dialect?.api ?? null,
          request: body,
          requestText: "",
          clientModel,
          response: null,
          rawResponse: null,
          responseBytes: null,
          responseIsJson: false,
          httpStatus: null,
          error: null,
          stream,
          partial: false,
          backend: null,
          modelVersion: this.gate.modelVersion,
          policy: route ? route.policy : null,
          retryCount: 0,
          startMs,
          endMs: startMs,
          ttftMs: null,
          spanId,
        }
      : null;
    try {
      const key = attribution?.rolloutId ?? null;
      let ranked = this.pool.rank(key);
      if (ranked.length === 0 && this.waitForBackend) {
        await this.waitForBackend(this.o.relay?.waitForWorkerMs ?? 0);
        ranked = this.pool.rank(key);
      }
      if (ranked.length === 0) {
        const message = "no inference backend is connected";
        if (record) Object.assign(record, { endMs: now(), httpStatus: 503, error: message });
        sendJson(res, 503, dialect?.errorBody(503, message) ?? openaiError(message, "upstream_error"));
        return;
      }
      await forwardCall({
        o: this.o,
        pool: this.pool,
        res,
        ranked,
        rerank: this.waitForBackend ? () => this.pool.rank(key) : null,
        waitForBackend: this.waitForBackend
          ? () => this.waitForBackend!(this.o.relay?.waitForWorkerMs ?? 0)
          : null,
        subpath: isChat ? "chat/completions" : "completions",
        request: new UpstreamRequest(body, this.o, route ? (route.model ?? clientModel) : null),
        stream,
        isChat,
        record,
        dialect,
      });
    } finally {
      if (record && dialect?.spanAttributes) record.dialectAttributes = dialect.spanAttributes();
      if (record && seq) this.recorder.record(record, seq);
      this.gate.leave();
    }
  }

  private async models(res: ServerResponse): Promise<void> {
    const names = [
      ...new Set(
        [this.o.model, ...Object.keys(this.o.policies), ...this.pool.backends.map((b) => b.model)].filter(
          (x): x is string => !!x,
        ),
      ),
    ];
    if (names.length) {
      return sendJson(res, 200, {
        object: "list",
        data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "agl-proxy" })),
      });
    }
    const backend = this.pool.rank(null)[0];
    if (!backend) return sendJson(res, 200, { object: "list", data: [] });
    try {
      const call = callUpstream(backend, "GET", "models", null, this.o.timeoutMs, "application/json");
      const { status, headers } = await call.started;
      const body = await collectBody(call);
      res.writeHead(status, {
        "content-type": header(headers["content-type"]) ?? "application/json",
        "content-length": body.length,
      });
      res.end(body);
    } catch (error) {
      sendJson(res, 502, openaiError(`upstream failed: ${(error as Error).message}`, "upstream_error"));
    }
  }
}
