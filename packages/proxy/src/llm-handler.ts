import type { IncomingMessage, ServerResponse } from "node:http";
import { AuthError, type Authenticator } from "./auth.js";
import type { BackendPool } from "./backends.js";
import { buildCallSpan, type CallRecord } from "./capture.js";
import { header, openaiError, readBody, sendJson } from "./http-util.js";
import type { ProxyLogger, ResolvedProxyOptions } from "./options.js";
import type { PauseGate } from "./pause.js";
import type { AttributionStyle, Mode, RouteMatch } from "./routes.js";
import { type SessionRegistry, turnFromCall } from "./sessions.js";
import type { SpanWriter } from "./span-writer.js";
import { relayStream } from "./stream-relay.js";
import {
  backoffMs,
  callUpstream,
  collectBody,
  isRetryableStatus,
  isTimeoutError,
  type UpstreamCall,
} from "./upstream.js";

interface Attribution {
  rolloutId: string;
  attemptId: string;
  style: AttributionStyle;
  mode: Mode | null;
  sessionId: string | null;
}

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The proxied LLM calls: attribution, rewrite, upstream with failover, relay, capture. */
export class LLMCallHandler {
  /** Span writes not yet settled; stop() and flush() wait for them. */
  readonly pendingWrites = new Set<Promise<unknown>>();
  private readonly warned = new Set<string>();

  constructor(
    private readonly o: ResolvedProxyOptions,
    private readonly writer: SpanWriter,
    private readonly pool: BackendPool,
    private readonly gate: PauseGate,
    private readonly auth: Authenticator,
    private readonly sessions: SessionRegistry,
    private readonly log: ProxyLogger,
  ) {}

  async handle(req: IncomingMessage, res: ServerResponse, match: RouteMatch): Promise<void> {
    const startMs = now();
    let attribution: Attribution | null;
    try {
      attribution = this.attribute(req, match);
    } catch (error) {
      if (error instanceof AuthError)
        return sendJson(res, error.status, openaiError(error.message, "authentication_error"));
      throw error;
    }
    if (match.op === "models") {
      if (req.method !== "GET") return sendJson(res, 405, openaiError("use GET", "invalid_request_error"));
      return this.models(res);
    }
    if (req.method !== "POST") return sendJson(res, 405, openaiError("use POST", "invalid_request_error"));
    if (!attribution && this.o.unattributed === "reject") {
      return sendJson(
        res,
        400,
        openaiError("this call is not attributed to a rollout attempt", "invalid_request_error"),
      );
    }

    const raw = await readBody(req, res, this.o.maxBodyBytes);
    if (raw === null) return;
    let body: Record<string, any>;
    try {
      body = JSON.parse(raw.toString("utf8"));
    } catch {
      return sendJson(res, 400, openaiError("request body is not valid JSON", "invalid_request_error"));
    }
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
      return sendJson(res, 400, openaiError("request body must be a JSON object", "invalid_request_error"));
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
    const isChat = match.op === "chat";
    const clientModel = body.model;
    const ranked = this.pool.rank(attribution?.rolloutId ?? null);
    this.rewrite(body, isChat, attribution?.mode ?? null, ranked[0]!.model);
    const stream = body.stream === true;
    // the sequence id is allocated while the upstream works, off the critical path
    const seq = attribution ? this.allocateSequenceId(attribution) : null;
    const payloadText = JSON.stringify(body);
    const payload = Buffer.from(payloadText);
    const record: Omit<CallRecord, "sequenceId"> | null = attribution
      ? {
          rolloutId: attribution.rolloutId,
          attemptId: attribution.attemptId,
          style: attribution.style,
          mode: attribution.mode,
          sessionId: attribution.sessionId,
          isChat,
          request: body,
          requestText: payloadText,
          clientModel,
          response: null,
          rawResponse: null,
          httpStatus: null,
          error: null,
          stream,
          partial: false,
          backend: null,
          modelVersion: this.gate.modelVersion,
          retryCount: 0,
          startMs,
          endMs: startMs,
          ttftMs: null,
        }
      : null;
    try {
      await this.forward(
        res,
        ranked,
        isChat ? "chat/completions" : "completions",
        payload,
        stream,
        isChat,
        record,
      );
    } finally {
      if (record && seq) this.capture(record, seq);
      this.gate.leave();
    }
  }

  /** Who the call belongs to, checked against the caller's credential. */
  private attribute(req: IncomingMessage, match: RouteMatch): Attribution | null {
    const principal = this.auth.llmPrincipal(req.headers);
    let a: Attribution | null = null;
    if (match.rolloutId && match.attemptId) {
      a = {
        rolloutId: match.rolloutId,
        attemptId: match.attemptId,
        style: match.style!,
        mode: match.mode ?? null,
        sessionId: null,
      };
    } else if (match.sessionId) {
      const s = this.sessions.get(match.sessionId);
      a = {
        rolloutId: s?.rollout_id ?? match.sessionId,
        attemptId: s?.attempt_id ?? "0",
        style: "session",
        mode: null,
        sessionId: match.sessionId,
      };
    } else {
      const h = req.headers;
      const rid = h["x-rollout-id"];
      const aid = h["x-attempt-id"];
      const trace = h[this.o.traceHeader];
      if (typeof rid === "string" && typeof aid === "string" && rid && aid) {
        a = { rolloutId: rid, attemptId: aid, style: "header", mode: null, sessionId: null };
      } else if ((rid === undefined) !== (aid === undefined)) {
        throw new AuthError(400, "x-rollout-id and x-attempt-id must be given together");
      } else if (typeof trace === "string" && trace) {
        const s = this.sessions.get(trace);
        a = {
          rolloutId: s?.rollout_id ?? trace,
          attemptId: s?.attempt_id ?? "0",
          style: "trace_header",
          mode: null,
          sessionId: s ? trace : null,
        };
      } else if (principal.kind === "attempt") {
        a = {
          rolloutId: principal.rolloutId,
          attemptId: principal.attemptId,
          style: "token",
          mode: null,
          sessionId: null,
        };
      }
    }
    if (
      principal.kind === "attempt" &&
      a &&
      (a.rolloutId !== principal.rolloutId || a.attemptId !== principal.attemptId)
    ) {
      throw new AuthError(403, "this token is scoped to another rollout attempt");
    }
    return a;
  }

  private rewrite(
    body: Record<string, any>,
    isChat: boolean,
    mode: Mode | null,
    backendModel: string | null,
  ): void {
    const o = this.o;
    if (o.rewriteModel) {
      const target = backendModel ?? o.model;
      if (target) body.model = target;
    }
    const modeConfig = mode ? o.modes[mode] : null;
    if (modeConfig && modeConfig.temperature !== null) body.temperature = modeConfig.temperature;
    if (o.returnTokenIds) body.return_token_ids = true;
    const wantLogprobs = modeConfig ? modeConfig.logprobs : o.logprobs;
    if (wantLogprobs) {
      if (isChat && body.logprobs !== true) body.logprobs = true;
      if (!isChat && typeof body.logprobs !== "number") body.logprobs = 1;
    }
    if (body.stream === true && o.includeUsageInStreams) {
      body.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
    }
    const temperature = body.temperature ?? 1;
    const hasLogprobs = isChat ? body.logprobs === true : typeof body.logprobs === "number";
    if (hasLogprobs && temperature !== 1 && mode !== "val") {
      this.warnOnce(
        `temperature:${temperature}`,
        `training call with temperature ${temperature} ≠ 1: vLLM's default raw logprobs are computed before ` +
          "temperature, so they are not the sampling distribution (set train temperature 1 or --logprobs-mode processed_logprobs)",
      );
    }
  }

  private async forward(
    res: ServerResponse,
    ranked: ReturnType<BackendPool["rank"]>,
    subpath: string,
    payload: Buffer,
    stream: boolean,
    isChat: boolean,
    record: Omit<CallRecord, "sequenceId"> | null,
  ): Promise<void> {
    const o = this.o;
    const tries = o.retries + 1;
    let clientGone = false;
    let current: UpstreamCall | null = null;
    const onClose = () => {
      if (!res.writableFinished) {
        clientGone = true;
        // propagate the abort so the engine frees the sequence
        current?.abort(new Error("client disconnected"));
      }
    };
    res.once("close", onClose);
    for (let attempt = 0; attempt < tries && !clientGone; attempt++) {
      const backend = ranked[attempt % ranked.length]!;
      if (record) {
        record.backend = backend.url;
        record.retryCount = attempt;
      }
      backend.inflight++;
      const last = attempt === tries - 1;
      try {
        const call = callUpstream(
          backend,
          "POST",
          subpath,
          payload,
          o.timeoutMs,
          stream ? "text/event-stream" : "application/json",
        );
        current = call;
        const { status, headers } = await call.started;
        if (isRetryableStatus(status) && !last) {
          call.abort(new Error("retrying"));
          this.pool.recordFailure(backend, `HTTP ${status}`);
          await sleep(backoffMs(attempt, o.backoffBaseMs, o.backoffMaxMs, header(headers["retry-after"])));
          continue;
        }
        const contentType = header(headers["content-type"]) ?? "application/json";
        if (stream && status < 300 && contentType.startsWith("text/event-stream")) {
          this.pool.recordSuccess(backend);
          await relayStream(call, status, res, isChat, record, o.timeoutMs, o.sseKeepAliveMs);
          return;
        }
        const body = await collectBody(call);
        if (status < 500) this.pool.recordSuccess(backend);
        else this.pool.recordFailure(backend, `HTTP ${status}`);
        if (!clientGone) {
          res.writeHead(status, { "content-type": contentType, "content-length": body.length });
          res.end(body);
        }
        if (record) {
          record.endMs = now();
          record.httpStatus = status;
          record.partial = clientGone;
          record.rawResponse = body.toString("utf8");
          if (contentType.includes("json")) {
            try {
              record.response = JSON.parse(record.rawResponse);
            } catch {
              record.error = "upstream response is not valid JSON";
            }
          }
          if (status >= 400 && !record.error) record.error = `upstream returned HTTP ${status}`;
          if (clientGone) record.error = "client disconnected";
        }
        return;
      } catch (error) {
        if (clientGone) {
          if (record) Object.assign(record, { endMs: now(), partial: true, error: "client disconnected" });
          return;
        }
        const timedOut = isTimeoutError(error);
        const message = timedOut ? `upstream sent nothing for ${o.timeoutMs} ms` : (error as Error).message;
        this.pool.recordFailure(backend, message);
        if (!last) {
          await sleep(backoffMs(attempt, o.backoffBaseMs, o.backoffMaxMs));
          continue;
        }
        if (record) Object.assign(record, { endMs: now(), httpStatus: timedOut ? 504 : 502, error: message });
        sendJson(res, timedOut ? 504 : 502, openaiError(`upstream failed: ${message}`, "upstream_error"));
        return;
      } finally {
        backend.inflight--;
        current = null;
      }
    }
    if (record && clientGone)
      Object.assign(record, { endMs: now(), partial: true, error: "client disconnected" });
  }

  private allocateSequenceId(a: Attribution): Promise<number | null> {
    return this.writer.nextSequenceId(a.rolloutId, a.attemptId);
  }

  /** Build and write the span after the client has its answer; failures are logged, never surfaced. */
  private capture(record: Omit<CallRecord, "sequenceId">, seq: Promise<number | null>): void {
    const write = this.writeSpan(record, seq).finally(() => this.pendingWrites.delete(write));
    this.pendingWrites.add(write);
  }

  private async writeSpan(
    record: Omit<CallRecord, "sequenceId">,
    seq: Promise<number | null>,
  ): Promise<void> {
    try {
      const sequenceId = await seq;
      if (sequenceId === null) return;
      const span = buildCallSpan({ ...record, sequenceId }, this.o);
      if (span.attributes?.["agl.proxy.token_ids_missing"] === true) {
        this.warnOnce(
          `no-ids:${record.backend}`,
          `backend ${record.backend} returned no token ids (is it vLLM >= 0.10.2?); calls are recorded and flagged agl.proxy.token_ids_missing`,
        );
      }
      if (record.sessionId && record.isChat && record.response) {
        this.sessions.resolve(record.sessionId).turns.push(turnFromCall(record.request, record.response));
      }
      await this.writer.write(span);
    } catch (error) {
      this.log.error(`recording a span for ${record.rolloutId} failed: ${(error as Error).message}`);
    }
  }

  private async models(res: ServerResponse): Promise<void> {
    const names = [
      ...new Set([this.o.model, ...this.pool.backends.map((b) => b.model)].filter((x): x is string => !!x)),
    ];
    if (names.length) {
      return sendJson(res, 200, {
        object: "list",
        data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "agl-proxy" })),
      });
    }
    const backend = this.pool.rank(null)[0]!;
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

  private warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.log.warn(message);
  }
}
