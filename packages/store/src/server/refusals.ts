/**
 * Refusals a client may never show. agl-ts clients (`@agl/client`, the dashboard) send
 * `x-agl-client` and surface every error they get; other clients — Python Agent Lightning's store
 * client above all — swallow some (a 422 on dequeue becomes `[]`, a 401 on dequeue becomes `None`), so
 * their user sees a runner idling without a word. For a request without that header, every 4xx is
 * also logged at warn with the route and the reason the answer gave. Tokens never appear: the reason
 * is the answer's own `detail` and the path has no query string.
 */
import type { Context } from "hono";
import type { StoreServerLogger } from "./logging.js";

/** Sent by agl-ts clients on every request: they show the errors they get, so no warn is needed. */
export const AGL_CLIENT_HEADER = "x-agl-client";

/** OTLP ingest logs its own refusals, with rollout and attempt ids (otlp/store-spans.ts). */
const SELF_LOGGING_PATHS = new Set(["/v1/traces"]);

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}…` : s);

/** The rollout and attempt a span write named, for its refusal line (span bodies are read once). */
const spanTargets = new WeakMap<Request, { rollout_id: unknown; attempt_id: unknown }>();

/** Remember which rollout/attempt a span route's body names (first span of a batch). */
export function noteSpanTarget(c: Context, body: unknown): void {
  const first = Array.isArray((body as { spans?: unknown })?.spans)
    ? (body as { spans: unknown[] }).spans[0]
    : body;
  if (typeof first !== "object" || first === null) return;
  const { rollout_id, attempt_id } = first as Record<string, unknown>;
  spanTargets.set(c.req.raw, { rollout_id, attempt_id });
}

/** Rollout/attempt ids of the request: route parameters, else what a span body named. */
function targetOf(c: Context): Record<string, string> {
  const out: Record<string, string> = {};
  const noted = spanTargets.get(c.req.raw);
  const rid = c.req.param("rid") ?? noted?.rollout_id;
  const aid = c.req.param("aid") ?? noted?.attempt_id;
  if (typeof rid === "string") out.rollout_id = clip(rid, 128);
  if (typeof aid === "string") out.attempt_id = clip(aid, 128);
  return out;
}

/** What a refusal's JSON body says (`detail` and `field`), or its status line when there is no such body. */
async function reasonOf(res: Response): Promise<{ reason: string; field?: string }> {
  if (!(res.headers.get("content-type") ?? "").includes("json")) return { reason: `HTTP ${res.status}` };
  try {
    const body = (await res.clone().json()) as { detail?: unknown; field?: unknown };
    const detail = body?.detail;
    const reason =
      typeof detail === "string"
        ? detail
        : detail === undefined
          ? `HTTP ${res.status}`
          : JSON.stringify(detail);
    return typeof body?.field === "string"
      ? { reason: clip(reason, 500), field: body.field }
      : { reason: clip(reason, 500) };
  } catch {
    return { reason: `HTTP ${res.status}` };
  }
}

/** After a request: warn about a 4xx answered to a client that does not say it shows errors. */
export async function warnUnseenRefusal(c: Context, logger: StoreServerLogger): Promise<void> {
  const status = c.res.status;
  if (status < 400 || status >= 500) return;
  if (c.req.header(AGL_CLIENT_HEADER) !== undefined) return;
  if (SELF_LOGGING_PATHS.has(c.req.path)) return;
  const { reason, field } = await reasonOf(c.res);
  logger.warn("request refused", {
    method: c.req.method,
    route: c.req.routePath,
    path: clip(c.req.path, 200),
    status,
    reason,
    ...(field === undefined ? {} : { field: clip(field, 200) }),
    ...targetOf(c),
  });
}
