/**
 * The HTTP layer of the store client: JSON in and out, bearer auth, and the reference's retry rule
 * (Agent Lightning §3.2) with backoff: a 5xx, 408, timeout or network error is retried only while a
 * health probe says the server is up; any other 4xx fails at once.
 *
 * Requests that create something (`idempotent: false`) are narrower: a 500, a 504, a client timeout
 * or a connection dropped after the request went out may all come after the store committed (the
 * server's per-request timeout answers 504 while the store call carries on), so a retry could
 * enqueue twice. They are retried only when the server provably did not act (NOT_PROCESSED_STATUS,
 * CONNECT_ERROR_CODES).
 *
 * Requests go through undici's `request` on a keep-alive connection pool rather than fetch/ky: on
 * the store's hot path (a few small JSON requests per rollout) fetch's Request/stream machinery cost
 * ~0.5 ms CPU per request against ~0.07 ms here (bench/results/store.md), which capped runner
 * throughput. ky stays for the legacy and http-agent clients, where it is not on a hot path.
 */
import { STATUS_CODES } from "node:http";
import { AbortedError, findUnstorable, InvalidArgumentError } from "@agl/core";
import { HTTPError, TimeoutError } from "ky";
import { Agent, errors as undiciErrors, request as undiciRequest } from "undici";
import { describeErrorBody, errorFromResponse, HttpNetworkError, type ServerErrorInfo } from "./errors.js";

export interface TransportOptions {
  /** Server root, e.g. http://127.0.0.1:4747 (the /v1/agl prefix is added). */
  url: string;
  token?: string | null;
  /** Per-request timeout. Default 30 s. */
  timeoutMs?: number;
  /** Delays before each retry. Default [1000, 2000, 5000]; [] disables retries. */
  retryDelaysMs?: readonly number[];
  /** Delays between health probes before giving up on a retry. Default [100, 200, 500]. */
  healthRetryDelaysMs?: readonly number[];
  /** Most keep-alive connections to the server at once. Default 64. */
  connections?: number;
  /** Custom fetch (tests, proxies); replaces the built-in connection pool. */
  fetch?: typeof fetch;
}

/** What a caller can see of a successful answer before its body is parsed. */
export interface ResponseInfo {
  status: number;
  header(name: string): string | null;
}

export interface RequestOptions {
  json?: unknown;
  searchParams?: Record<string, string | number | boolean | readonly (string | number | boolean)[]>;
  /** false: no retries (dequeue must not claim twice). Default true. */
  retry?: boolean;
  /**
   * false for requests whose repetition would create a second entity (enqueue, start rollout or
   * attempt, add resources): retried only when the server cannot have acted on them. Default true.
   */
  idempotent?: boolean;
  timeoutMs?: number;
  /** Sees the successful response (e.g. to read headers) before its body is parsed. */
  onResponse?: (response: ResponseInfo) => void;
  /**
   * Cancels the request (in flight, its connection is dropped, which ends the server's work on it)
   * and any retry: the call rejects with AbortedError.
   */
  signal?: AbortSignal;
}

interface RawResponse extends ResponseInfo {
  text: string;
}

/** One HTTP exchange; throws only when no answer arrived (network error or timeout). */
type Send = (
  method: "GET" | "POST",
  url: string,
  body: string | undefined,
  headers: Record<string, string>,
  timeoutMs: number,
  signal?: AbortSignal,
) => Promise<RawResponse>;

/** No answer within the timeout (retried like a network error). */
class RequestTimeoutError extends Error {}

const RETRY_STATUS = [408, 500, 502, 503, 504];
/**
 * Answers that say the request was not processed, so even a non-idempotent one may be resent:
 * 408 (the server gave up before the whole request arrived) and 503 (refused as unavailable).
 * 502 is not here: a gateway also says it when the upstream dropped the connection after acting
 * (nginx's proxy_next_upstream does not resend non-idempotent requests for the same reason).
 */
const NOT_PROCESSED_STATUS = [408, 503];
/** Errors raised while connecting, before any byte of the request was written. */
const CONNECT_ERROR_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "UND_ERR_CONNECT_TIMEOUT"]);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Like sleep, but ends early (without error; the caller checks the signal) when `signal` aborts. */
function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return sleep(ms).then(() => {});
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

function undiciSend(agent: Agent): Send {
  return async (method, url, body, headers, timeoutMs, signal) => {
    try {
      const res = await undiciRequest(url, {
        method,
        headers,
        body,
        dispatcher: agent,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        ...(signal ? { signal } : {}),
      });
      const text = await res.body.text();
      const resHeaders = res.headers;
      return {
        status: res.statusCode,
        text,
        header: (name) => {
          const v = resHeaders[name.toLowerCase()];
          return v === undefined ? null : Array.isArray(v) ? v.join(", ") : v;
        },
      };
    } catch (error) {
      if (
        error instanceof undiciErrors.HeadersTimeoutError ||
        error instanceof undiciErrors.BodyTimeoutError
      ) {
        throw new RequestTimeoutError("request timed out", { cause: error });
      }
      throw error;
    }
  };
}

function fetchSend(fetchImpl: typeof fetch): Send {
  return async (method, url, body, headers, timeoutMs, callerSignal) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = callerSignal ? AbortSignal.any([timeout, callerSignal]) : timeout;
    try {
      const res = await fetchImpl(url, { method, headers, body, signal });
      const text = await res.text();
      return { status: res.status, text, header: (name) => res.headers.get(name) };
    } catch (error) {
      // The caller's abort is reported by request(); only a timeout becomes RequestTimeoutError.
      if (timeout.aborted && !callerSignal?.aborted)
        throw new RequestTimeoutError("request timed out", { cause: error });
      throw error;
    }
  };
}

export class StoreTransport {
  readonly root: string;
  private readonly prefix: string;
  private readonly agent: Agent | undefined;
  private readonly send: Send;
  private readonly headers: Record<string, string>;
  private readonly jsonHeaders: Record<string, string>;
  private readonly healthDelays: readonly number[];
  private readonly retryDelays: readonly number[];
  private readonly timeoutMs: number;
  private closed = false;

  constructor(options: TransportOptions) {
    this.root = options.url.replace(/\/+$/, "");
    this.prefix = `${this.root}/v1/agl/`;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retryDelays = options.retryDelaysMs ?? [1000, 2000, 5000];
    this.healthDelays = options.healthRetryDelaysMs ?? [100, 200, 500];
    // x-agl-client: this client surfaces every error it gets, so the server need not warn about its 4xx.
    this.headers = { accept: "application/json", "x-agl-client": "agl-ts" };
    if (options.token) this.headers.authorization = `Bearer ${options.token}`;
    this.jsonHeaders = { ...this.headers, "content-type": "application/json" };
    if (options.fetch) {
      this.send = fetchSend(options.fetch);
    } else {
      // Idle sockets are unref'd by undici, so the pool never keeps a process alive on its own.
      this.agent = new Agent({ connections: options.connections ?? 64, keepAliveTimeout: 4_000 });
      this.send = undiciSend(this.agent);
    }
  }

  /** GET /health, retried on the health delays; true once it answers 200. */
  async isHealthy(): Promise<boolean> {
    for (let i = 0; ; i++) {
      try {
        const res = await this.send(
          "GET",
          `${this.prefix}health`,
          undefined,
          this.headers,
          Math.min(this.timeoutMs, 5_000),
        );
        if (res.status >= 200 && res.status < 300) return true;
      } catch {
        // Unreachable: try again after the next delay.
      }
      if (i >= this.healthDelays.length || this.closed) return false;
      await sleep(this.healthDelays[i]!);
    }
  }

  async request<T>(method: "get" | "post", path: string, options: RequestOptions = {}): Promise<T> {
    const verb = method === "get" ? "GET" : "POST";
    let url = `${this.prefix}${path}`;
    if (options.searchParams) {
      const query = toSearchParams(options.searchParams).toString();
      if (query) url += `?${query}`;
    }
    const body = options.json === undefined ? undefined : serialise(options.json);
    const headers = body === undefined ? this.headers : this.jsonHeaders;
    const timeoutMs = options.timeoutMs ?? this.timeoutMs;
    const maxRetries = options.retry === false ? 0 : this.retryDelays.length;
    const idempotent = options.idempotent !== false;
    const signal = options.signal;
    for (let attempt = 0; ; attempt++) {
      AbortedError.throwIfAborted(signal, `${verb} ${path}`);
      let res: RawResponse | undefined;
      let failure: Error;
      let notProcessed: boolean;
      try {
        res = await this.send(verb, url, body, headers, timeoutMs, signal);
      } catch (error) {
        AbortedError.throwIfAborted(signal, `${verb} ${path}`);
        failure = networkError(error, verb, url);
        notProcessed = isConnectError(error);
      }
      if (res) {
        if (res.status >= 200 && res.status < 300) {
          options.onResponse?.(res);
          return (res.text === "" ? null : JSON.parse(res.text)) as T;
        }
        failure = responseError(res, verb, url);
        if (!RETRY_STATUS.includes(res.status)) throw failure;
        notProcessed = NOT_PROCESSED_STATUS.includes(res.status);
      }
      // The store may have committed it: resending a create could duplicate it (enqueue twice).
      if (!idempotent && !notProcessed!) throw failure!;
      // Retry only while the server answers its health probe: a dead server fails fast.
      if (attempt >= maxRetries || this.closed || !(await this.isHealthy())) throw failure!;
      await abortableSleep(this.retryDelays[attempt] ?? 0, signal);
    }
  }

  /** Drop pooled connections; requests still in flight fail with a network error. */
  async close(): Promise<void> {
    this.closed = true;
    await this.agent?.destroy();
  }
}

/** JSON text of a request body; a body no store could accept fails like the store would (naming the field). */
function serialise(json: unknown): string {
  try {
    return JSON.stringify(json);
  } catch (error) {
    const problem = findUnstorable(json);
    const field = problem
      ? problem.path.map((p) => (typeof p === "number" ? `[${p}]` : `.${p}`)).join("")
      : "";
    throw new InvalidArgumentError(
      field.replace(/^\./, ""),
      problem?.message ?? `cannot be sent as JSON (${(error as Error).message})`,
    );
  }
}

function responseError(res: RawResponse, method: string, url: string): Error {
  let body: unknown = null;
  try {
    body = JSON.parse(res.text);
  } catch {
    body = res.text;
  }
  const info: ServerErrorInfo = {
    status: res.status,
    method,
    url,
    ...describeErrorBody(body, STATUS_CODES[res.status] ?? `HTTP ${res.status}`),
  };
  return errorFromResponse(info, body);
}

function networkError(error: unknown, method: string, url: string): Error {
  const detail =
    error instanceof RequestTimeoutError
      ? "request timed out"
      : error instanceof Error
        ? `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}`
        : String(error);
  return new HttpNetworkError({ status: 0, method, url, detail, errorType: null, field: null }, error);
}

/** True when the error (or one it wraps) happened while connecting, so nothing was sent. */
function isConnectError(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && CONNECT_ERROR_CODES.has(code)) return true;
    // fetch and happy-eyeballs connects wrap one error per address tried.
    if (e instanceof AggregateError && e.errors.length > 0 && e.errors.every(isConnectError)) return true;
  }
  return false;
}

function toSearchParams(params: NonNullable<RequestOptions["searchParams"]>): URLSearchParams {
  const out = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (Array.isArray(value)) for (const v of value) out.append(key, String(v));
    else out.append(key, String(value));
  }
  return out;
}

/** Turn whatever ky threw into an HttpError (or the matching core error for store semantics). */
export async function toHttpError(error: unknown, method: string, url: string): Promise<Error> {
  if (error instanceof HTTPError) {
    const status = error.response.status;
    let body: unknown = null;
    try {
      const text = await error.response.text();
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    } catch {
      // The body could not be read; the status alone has to do.
    }
    const info: ServerErrorInfo = {
      status,
      method,
      url,
      ...describeErrorBody(body, error.response.statusText),
    };
    return errorFromResponse(info, body);
  }
  const detail =
    error instanceof TimeoutError
      ? "request timed out"
      : error instanceof Error
        ? `${error.message}${error.cause instanceof Error ? ` (${error.cause.message})` : ""}`
        : String(error);
  return new HttpNetworkError({ status: 0, method, url, detail, errorType: null, field: null }, error);
}
