import type { Context } from "hono";

export interface ForwardOptions {
  /** The store's base URL (without /v1/agl). */
  storeUrl: string;
  /** Per-request deadline for the store's answer, ms. */
  timeoutMs: number;
  /** Largest request body forwarded, bytes. */
  bodyLimitBytes: number;
}

/**
 * The only store calls the dashboard forwards: the v0.3 read routes, by method and exact route pattern
 * (`:x` is one path segment). A suffix rule is not enough: `POST /resources/search` ends in `/search`
 * but is the write `POST /resources/:id`, which would create a resource set named "search".
 */
export const READ_ROUTES: ReadonlyArray<readonly ["GET" | "POST", string]> = [
  ["GET", "/v1/agl/health"],
  ["GET", "/v1/agl/statistics"],
  ["GET", "/v1/agl/rollouts"],
  ["POST", "/v1/agl/rollouts/search"],
  ["GET", "/v1/agl/rollouts/:rid"],
  ["GET", "/v1/agl/rollouts/:rid/attempts"],
  ["POST", "/v1/agl/rollouts/:rid/attempts/search"],
  ["GET", "/v1/agl/rollouts/:rid/attempts/latest"],
  ["GET", "/v1/agl/spans"],
  ["POST", "/v1/agl/spans/search"],
  ["GET", "/v1/agl/resources"],
  ["GET", "/v1/agl/resources/latest"],
  ["GET", "/v1/agl/resources/:id"],
  ["GET", "/v1/agl/workers"],
  ["POST", "/v1/agl/workers/search"],
  ["GET", "/v1/agl/workers/:wid"],
];

/**
 * The store path to call for `method path` when it is one of {@link READ_ROUTES}, else null. The path
 * is rebuilt from the decoded segments (each re-encoded whole), so the store routes exactly the call
 * that was checked: an encoded `/` or a dot segment cannot turn it into another route.
 */
export function readRoutePath(method: string, path: string): string | null {
  const segments = splitPath(path);
  if (segments === null) return null;
  for (const [m, pattern] of READ_ROUTES) {
    if (m !== method) continue;
    const parts = pattern.split("/").slice(1);
    if (parts.length !== segments.length) continue;
    if (parts.every((p, i) => p.startsWith(":") || p === segments[i])) {
      return `/${segments.map(encodeURIComponent).join("/")}`;
    }
  }
  return null;
}

/** Whether the dashboard forwards `method path` (one of {@link READ_ROUTES}). */
export function isReadOnlyCall(method: string, path: string): boolean {
  return readRoutePath(method, path) !== null;
}

/** The decoded, non-empty segments of a URL path; null for an empty segment or undecodable escapes. */
function splitPath(path: string): string[] | null {
  const raw = path.split("/").slice(1);
  const out: string[] = [];
  for (const segment of raw) {
    let decoded: string;
    try {
      decoded = decodeURIComponent(segment);
    } catch {
      return null;
    }
    if (decoded === "" || decoded === "." || decoded === "..") return null;
    out.push(decoded);
  }
  return out;
}

const FORWARDED_REQUEST_HEADERS = ["authorization", "content-type", "accept"];
const FORWARDED_RESPONSE_HEADERS = ["content-type", "www-authenticate", "x-agl-server"];

/**
 * Forward one read-only /v1/agl call to the store, so the page talks to its own origin (no CORS
 * setup on the store, which may be a Python server). The store enforces its own token.
 */
export async function forwardToStore(c: Context, options: ForwardOptions): Promise<Response> {
  const url = new URL(c.req.url);
  const target = readRoutePath(c.req.method, url.pathname);
  if (target === null) {
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
    upstream = await fetch(`${options.storeUrl}${target}${url.search}`, {
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
