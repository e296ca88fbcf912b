/**
 * The HTTP layer of the store client, on ky: JSON in and out, bearer auth, and the reference's retry
 * rule (Agent Lightning §3.2) with backoff: a 5xx, 408, timeout or network error is retried only
 * while a health probe says the server is up; any other 4xx fails at once.
 */
import ky, { HTTPError, type KyInstance, TimeoutError } from "ky";
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
  /** Custom fetch (tests, proxies). */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  json?: unknown;
  searchParams?: Record<string, string | number | boolean | readonly (string | number | boolean)[]>;
  /** false: no retries (dequeue must not claim twice). Default true. */
  retry?: boolean;
  timeoutMs?: number;
  /** Sees the successful response (e.g. to read headers) before its body is parsed. */
  onResponse?: (response: Response) => void;
}

const RETRY_STATUS = [408, 500, 502, 503, 504];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class StoreTransport {
  readonly root: string;
  private readonly ky: KyInstance;
  private readonly health: KyInstance;
  private readonly healthDelays: readonly number[];
  private readonly retryDelays: readonly number[];
  private readonly timeoutMs: number;

  constructor(options: TransportOptions) {
    this.root = options.url.replace(/\/+$/, "");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retryDelays = options.retryDelaysMs ?? [1000, 2000, 5000];
    this.healthDelays = options.healthRetryDelaysMs ?? [100, 200, 500];
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    const base = ky.create({
      prefixUrl: `${this.root}/v1/agl`,
      headers,
      timeout: this.timeoutMs,
      throwHttpErrors: true,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
    this.health = base.extend({ retry: 0, timeout: Math.min(this.timeoutMs, 5_000) });
    const delays = this.retryDelays;
    this.ky = base.extend({
      retry: {
        limit: delays.length,
        methods: ["get", "post", "put", "delete"],
        statusCodes: RETRY_STATUS,
        retryOnTimeout: true,
        delay: (attempt) => delays[Math.min(attempt, delays.length) - 1] ?? 0,
        jitter: false,
        shouldRetry: async ({ error }) => {
          if (error instanceof HTTPError && !RETRY_STATUS.includes(error.response.status)) return false;
          return !!(await this.isHealthy());
        },
      },
    });
  }

  /** GET /health, retried on the health delays; true once it answers 200. */
  async isHealthy(): Promise<boolean> {
    for (let i = 0; ; i++) {
      try {
        const res = await this.health.get("health", { throwHttpErrors: false });
        if (res.ok) return true;
      } catch {
        // Unreachable: try again after the next delay.
      }
      if (i >= this.healthDelays.length) return false;
      await sleep(this.healthDelays[i]!);
    }
  }

  async request<T>(method: "get" | "post", path: string, options: RequestOptions = {}): Promise<T> {
    const url = `${this.root}/v1/agl/${path}`;
    try {
      const res = await this.ky(path, {
        method,
        ...(options.json !== undefined ? { json: options.json } : {}),
        ...(options.searchParams ? { searchParams: toSearchParams(options.searchParams) } : {}),
        ...(options.retry === false ? { retry: 0 } : {}),
        ...(options.timeoutMs !== undefined ? { timeout: options.timeoutMs } : {}),
      });
      options.onResponse?.(res);
      const text = await res.text();
      return (text === "" ? null : JSON.parse(text)) as T;
    } catch (error) {
      throw await toHttpError(error, method.toUpperCase(), url);
    }
  }
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
