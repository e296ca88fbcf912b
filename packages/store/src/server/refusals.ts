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
const spanTargets = new WeakMap<Request, Record<string, string>>();

/** Remember which rollout/attempt a span route's body names (first span of a batch). */
export function noteSpanTarget(c: Context, body: unknown): void {
  spanTargets.set(c.req.raw, spanBodyTarget(body));
}

/** Rollout/attempt ids of the request: route parameters, else what a span body named. */
function targetOf(c: Context): Record<string, string> {
  return spanTargets.get(c.req.raw) ?? idsTarget(c.req.param("rid"), c.req.param("aid"));
}

/** What a refusal's JSON body says (`detail` and `field`), or its status line when there is no such body. */
async function reasonOf(res: Response): Promise<{ reason: string; field?: string }> {
  if (!(res.headers.get("content-type") ?? "").includes("json")) return { reason: `HTTP ${res.status}` };
  try {
    return reasonFromBody(res.status, await res.clone().json());
  } catch {
    return { reason: `HTTP ${res.status}` };
  }
}

/** The reason and field of a refusal, from its parsed JSON body. */
function reasonFromBody(status: number, parsed: unknown): { reason: string; field?: string } {
  const body = parsed as { detail?: unknown; field?: unknown } | null;
  const detail = body?.detail;
  const reason =
    typeof detail === "string" ? detail : detail === undefined ? `HTTP ${status}` : JSON.stringify(detail);
  return typeof body?.field === "string"
    ? { reason: clip(reason, 500), field: body.field }
    : { reason: clip(reason, 500) };
}

/** What is known of a refused request, for its warn line. */
export interface Refused {
  method: string;
  /** The route's pattern, e.g. /v1/agl/rollouts/:rid/attempts/:aid. */
  route: string;
  path: string;
  status: number;
  /** The rollout and attempt ids the request named (route parameters or a span body), if any. */
  target: Record<string, string>;
}

/** Warn about a 4xx whose answer (`body`) a client that does not say it shows errors got. */
export function warnRefusal(logger: StoreServerLogger, refused: Refused, body: unknown): void {
  warnLine(logger, refused, reasonFromBody(refused.status, body));
}

function warnLine(
  logger: StoreServerLogger,
  { method, route, path, status, target }: Refused,
  { reason, field }: { reason: string; field?: string },
): void {
  logger.warn("request refused", {
    method,
    route,
    path: clip(path, 200),
    status,
    reason,
    ...(field === undefined ? {} : { field: clip(field, 200) }),
    ...target,
  });
}

/** Whether a refusal with this status to this request gets a warn line (see the file's comment). */
export function refusalUnseen(status: number, path: string, clientHeader: string | undefined): boolean {
  return status >= 400 && status < 500 && clientHeader === undefined && !SELF_LOGGING_PATHS.has(path);
}

/** The ids a span route's body names (first span of a batch), as targetOf reports them. */
export function spanBodyTarget(body: unknown): Record<string, string> {
  const first = Array.isArray((body as { spans?: unknown })?.spans)
    ? (body as { spans: unknown[] }).spans[0]
    : body;
  if (typeof first !== "object" || first === null) return {};
  const { rollout_id, attempt_id } = first as Record<string, unknown>;
  return idsTarget(rollout_id, attempt_id);
}

/** The ids of a refused request, clipped for the log. */
export function idsTarget(rid: unknown, aid: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (typeof rid === "string") out.rollout_id = clip(rid, 128);
  if (typeof aid === "string") out.attempt_id = clip(aid, 128);
  return out;
}

/** After a request: warn about a 4xx answered to a client that does not say it shows errors. */
export async function warnUnseenRefusal(c: Context, logger: StoreServerLogger): Promise<void> {
  const status = c.res.status;
  if (!refusalUnseen(status, c.req.path, c.req.header(AGL_CLIENT_HEADER))) return;
  const refused = {
    method: c.req.method,
    route: c.req.routePath,
    path: c.req.path,
    status,
    target: targetOf(c),
  };
  warnLine(logger, refused, await reasonOf(c.res));
}
