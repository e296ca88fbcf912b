import type { ServerResponse } from "node:http";
import type { Backend, BackendPool } from "./backends.js";
import type { PendingCall } from "./call-recorder.js";
import type { ClientDialect } from "./dialects/index.js";
import { header, openaiError, sendJson } from "./http-util.js";
import { ModelVersionSchema, type ResolvedProxyOptions } from "./options.js";
import type { UpstreamRequest } from "./rewrite.js";
import { relayStream } from "./stream-relay.js";
import {
  backoffMs,
  callUpstream,
  collectBody,
  isRetryableStatus,
  isTimeoutError,
  type UpstreamCall,
} from "./upstream.js";

const now = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ForwardArgs {
  o: ResolvedProxyOptions;
  pool: BackendPool;
  res: ServerResponse;
  /** Backends in preference order; try i goes to ranked[i % n], so a dead replica fails over. */
  ranked: Backend[];
  /**
   * Relay mode: rank again before each retry, since workers come and go (a dead worker has left the
   * pool, a reconnected one has joined it).
   */
  rerank?: (() => Backend[]) | null;
  /**
   * Relay mode: wait (up to `waitForWorkerMs`) for a worker when a retry finds none connected, as a new
   * call does, so a restarting worker's in-flight calls are served once it is back instead of being sent
   * to the dead one. Resolves whether one came.
   */
  waitForBackend?: (() => Promise<boolean>) | null;
  subpath: string;
  request: UpstreamRequest;
  stream: boolean;
  isChat: boolean;
  record: PendingCall | null;
  /** Set when the client speaks another API than the upstream's chat (`/v1/responses`, `/v1/messages`). */
  dialect?: ClientDialect | null;
}

/**
 * Send the call upstream with retries and failover, and answer the client: relay a stream as it comes, or
 * the whole body. Fills in `record` with what happened. Never throws for upstream failures (502/504).
 */
export async function forwardCall(a: ForwardArgs): Promise<void> {
  const { o, pool, res, ranked, record } = a;
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
    let list = ranked;
    if (attempt > 0 && a.rerank) {
      list = a.rerank();
      if (list.length === 0 && a.waitForBackend) {
        await a.waitForBackend();
        list = clientGone ? [] : a.rerank();
      }
      if (list.length === 0) {
        if (clientGone) break;
        const message = "no inference backend is connected";
        if (record) Object.assign(record, { endMs: now(), httpStatus: 503, error: message });
        sendJson(res, 503, a.dialect?.errorBody(503, message) ?? openaiError(message, "upstream_error"));
        return;
      }
    }
    const backend = list[attempt % list.length]!;
    // each backend gets its own model name: a failover must not send the first replica's name
    const payload = a.request.payloadFor(backend);
    if (record) {
      record.backend = backend.url;
      record.retryCount = attempt;
      record.requestText = a.request.sentText;
    }
    backend.inflight++;
    const last = attempt === tries - 1;
    try {
      const call = callUpstream(
        backend,
        "POST",
        a.subpath,
        payload,
        o.timeoutMs,
        a.stream ? "text/event-stream" : "application/json",
      );
      current = call;
      const { status, headers } = await call.started;
      if (isRetryableStatus(status) && !last) {
        call.abort(new Error("retrying"));
        pool.recordFailure(backend, `HTTP ${status}`);
        await sleep(backoffMs(attempt, o.backoffBaseMs, o.backoffMaxMs, header(headers["retry-after"])));
        continue;
      }
      const contentType = header(headers["content-type"]) ?? "application/json";
      // The policy version that actually served the call, when the backend says (the trainer's policy
      // server does): with weights published between calls it may be newer than the proxy-level one.
      const served = servedModelVersion(header(headers["x-agl-model-version"]));
      if (record && served !== null) record.modelVersion = served;
      // Resumed on newer weights mid-generation (partial rollouts): the oldest version of any token.
      const start = servedModelVersion(header(headers["x-agl-model-version-start"]));
      if (record && start !== null) record.modelVersionStart = start;
      if (a.stream && status < 300 && contentType.startsWith("text/event-stream")) {
        pool.recordSuccess(backend);
        await relayStream(
          call,
          status,
          res,
          a.isChat,
          record,
          o.timeoutMs,
          o.sseKeepAliveMs,
          a.dialect?.createStream(),
        );
        return;
      }
      const body = await collectBody(call);
      if (status < 500) pool.recordSuccess(backend);
      else pool.recordFailure(backend, `HTTP ${status}`);
      if (!clientGone && a.dialect) {
        const out = a.dialect.translateResponse(status, body, contentType);
        res.writeHead(out.status, { "content-type": "application/json", "content-length": out.body.length });
        res.end(out.body);
      } else if (!clientGone) {
        res.writeHead(status, { "content-type": contentType, "content-length": body.length });
        res.end(body);
      }
      if (record) {
        record.endMs = now();
        record.httpStatus = status;
        record.partial = clientGone;
        // parsed when the span is built, after the client has its answer
        record.responseBytes = body;
        record.responseIsJson = contentType.includes("json");
        if (clientGone) record.error = "client disconnected";
        else if (status >= 400) record.error = `upstream returned HTTP ${status}`;
      }
      return;
    } catch (error) {
      if (clientGone) {
        if (record) Object.assign(record, { endMs: now(), partial: true, error: "client disconnected" });
        return;
      }
      const timedOut = isTimeoutError(error);
      const message = timedOut ? `upstream sent nothing for ${o.timeoutMs} ms` : (error as Error).message;
      pool.recordFailure(backend, message);
      if (!last) {
        await sleep(backoffMs(attempt, o.backoffBaseMs, o.backoffMaxMs));
        continue;
      }
      if (record) Object.assign(record, { endMs: now(), httpStatus: timedOut ? 504 : 502, error: message });
      const failure = `upstream failed: ${message}`;
      const status = timedOut ? 504 : 502;
      sendJson(res, status, a.dialect?.errorBody(status, failure) ?? openaiError(failure, "upstream_error"));
      return;
    } finally {
      backend.inflight--;
      current = null;
    }
  }
  if (record && clientGone)
    Object.assign(record, { endMs: now(), partial: true, error: "client disconnected" });
}

/** The `x-agl-model-version` header as a version: an integer string becomes a number; junk is ignored. */
export function servedModelVersion(value: string | undefined): string | number | null {
  if (value === undefined) return null;
  const v = value.trim();
  if (v === "" || v.length > 200) return null;
  if (/^-?\d{1,15}$/.test(v)) return Number(v);
  return ModelVersionSchema.safeParse(v).success ? v : null;
}
