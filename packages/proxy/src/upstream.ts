import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import type { Backend } from "./backends.js";

export interface UpstreamStart {
  status: number;
  headers: IncomingHttpHeaders;
}

/** Where the body goes once the caller has seen the status; chunks arriving earlier are queued. */
export interface BodySink {
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(error: Error): void;
}

export interface UpstreamCall {
  /** Resolves when the status and headers arrive; rejects on connect errors and header timeouts. */
  started: Promise<UpstreamStart>;
  attach(sink: BodySink): void;
  abort(reason: Error): void;
  /** Stop reading until resume() (backpressure from a slow client). */
  pause(): void;
  resume(): void;
}

/** How a backend reached other than over HTTP (a relay worker's WebSocket) is called. */
export interface UpstreamTransport {
  call(
    method: "GET" | "POST",
    subpath: string,
    body: Buffer | null,
    timeoutMs: number,
    accept: string,
  ): UpstreamCall;
}

export const isTimeoutError = (e: unknown) =>
  (e as any)?.code === "UND_ERR_HEADERS_TIMEOUT" || (e as any)?.code === "UND_ERR_BODY_TIMEOUT";

/**
 * Send one request to a backend through undici's low-level dispatch (measurably cheaper per call than
 * node:http's client, which matters at thousands of calls per second). `timeoutMs` bounds the wait for
 * headers and every silence between body chunks: a non-streamed vLLM call is silent until done, a stream
 * must keep sending.
 */
export function callUpstream(
  backend: Backend,
  method: "GET" | "POST",
  subpath: string,
  body: Buffer | null,
  timeoutMs: number,
  accept: string,
): UpstreamCall {
  if (backend.transport) return backend.transport.call(method, subpath, body, timeoutMs, accept);
  const headers: Record<string, string> = { accept };
  if (body) headers["content-type"] = "application/json";
  if (backend.apiKey) headers.authorization = `Bearer ${backend.apiKey}`;

  let controller: Dispatcher.DispatchController | null = null;
  let pendingAbort: Error | null = null;
  let sink: BodySink | null = null;
  let queued: Buffer[] | null = [];
  let ended = false;
  let failure: Error | null = null;
  let resolveStart!: (s: UpstreamStart) => void;
  let rejectStart!: (e: Error) => void;
  let startedYet = false;
  const started = new Promise<UpstreamStart>((resolve, reject) => {
    resolveStart = resolve;
    rejectStart = reject;
  });

  const fail = (error: Error) => {
    if (!startedYet) {
      startedYet = true;
      rejectStart(error);
      return;
    }
    if (sink) sink.onError(error);
    else failure = error;
  };

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(c) {
      controller = c;
      if (pendingAbort) c.abort(pendingAbort);
    },
    onResponseStart(_c, status, responseHeaders) {
      // 1xx informational answers come first and are not the response
      if (status < 200) return;
      startedYet = true;
      resolveStart({ status, headers: responseHeaders });
    },
    onResponseData(_c, chunk) {
      if (sink) sink.onData(chunk);
      else queued!.push(chunk);
    },
    onResponseEnd() {
      if (sink) sink.onEnd();
      else ended = true;
    },
    onResponseError(_c, error) {
      fail(error);
    },
  };

  backend.pool!.dispatch(
    {
      origin: backend.origin,
      path: `${backend.apiPath}/${subpath}`,
      method,
      headers,
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    },
    handler,
  );

  return {
    started,
    attach(s) {
      sink = s;
      const q = queued!;
      queued = null;
      for (const chunk of q) s.onData(chunk);
      if (failure) s.onError(failure);
      else if (ended) s.onEnd();
    },
    abort(reason) {
      if (controller) controller.abort(reason);
      else pendingAbort = reason;
    },
    pause: () => controller?.pause(),
    resume: () => controller?.resume(),
  };
}

/** The whole body of a started call. */
export function collectBody(call: UpstreamCall): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    call.attach({
      onData(c) {
        chunks.push(c);
        size += c.length;
      },
      onEnd: () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size)),
      onError: reject,
    });
  });
}

export const isRetryableStatus = (s: number) => s === 408 || s === 409 || s === 429 || s >= 500;

/** min(base·2^i, max) with ±25 % jitter, or the upstream's Retry-After when it gives one (capped). */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, retryAfter?: string): number {
  if (retryAfter) {
    const seconds = Number(retryAfter);
    if (Number.isFinite(seconds) && seconds >= 0) return Math.min(seconds * 1000, maxMs);
  }
  const raw = Math.min(baseMs * 2 ** attempt, maxMs);
  return raw * (0.75 + Math.random() * 0.5);
}
