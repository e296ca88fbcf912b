import type { Context } from "hono";

export interface ForwardOptions {
  /** The store's base URL (without /v1/agl). */
  storeUrl: string;
  /** Per-request deadline for the store's answer, ms. */
  timeoutMs: number;
  /** Largest request body forwarded, bytes. */
  bodyLimitBytes: number;
}

/** Read-only: GETs, and POST only to the `.../search` query routes. */
export function isReadOnlyCall(method: string, path: string): boolean {
  if (method === "GET") return true;
  return method === "POST" && path.endsWith("/search");
}

const FORWARDED_REQUEST_HEADERS = ["authorization", "content-type", "accept"];
const FORWARDED_RESPONSE_HEADERS = ["content-type", "www-authenticate", "x-agl-server"];

/**
 * Forward one read-only /v1/agl call to the store, so the page talks to its own origin (no CORS
 * setup on the store, which may be a Python server). The store enforces its own token.
 */
export async function forwardToStore(c: Context, options: ForwardOptions): Promise<Response> {
  const url = new URL(c.req.url);
  if (!isReadOnlyCall(c.req.method, url.pathname)) {
    return c.json(
      {
        detail: `The dashboard only reads the store; ${c.req.method} ${url.pathname} is not forwarded`,
        error_type: "MethodNotAllowed",
      },
      405,
    );
  }
  const headers = new Headers();
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = c.req.header(name);
    if (value) headers.set(name, value);
  }
  let body: string | undefined;
  if (c.req.method === "POST") {
    body = await c.req.text();
    if (Buffer.byteLength(body) > options.bodyLimitBytes) {
      return c.json(
        { detail: `Request body larger than ${options.bodyLimitBytes} bytes`, error_type: "PayloadTooLarge" },
        413,
      );
    }
  }
  let upstream: Response;
  try {
    upstream = await fetch(`${options.storeUrl}${url.pathname}${url.search}`, {
      method: c.req.method,
      headers,
      body,
      signal: AbortSignal.timeout(options.timeoutMs),
      redirect: "manual",
    });
  } catch (error) {
    const timedOut = (error as Error).name === "TimeoutError";
    return c.json(
      {
        detail: timedOut
          ? `The store at ${options.storeUrl} did not answer within ${options.timeoutMs} ms`
          : `Cannot reach the store at ${options.storeUrl}: ${(error as Error).message}`,
        error_type: timedOut ? "GatewayTimeout" : "BadGateway",
      },
      timedOut ? 504 : 502,
    );
  }
  const out = new Headers();
  for (const name of FORWARDED_RESPONSE_HEADERS) {
    const value = upstream.headers.get(name);
    if (value) out.set(name, value);
  }
  return new Response(upstream.body, { status: upstream.status, headers: out });
}
