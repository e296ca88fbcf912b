/**
 * The three requests every rollout of Agent Lightning's clients makes (start_rollout, add_span,
 * update_attempt), as functions of the parsed JSON body: the hono routes and the node fast path
 * (fast-routes.ts) both answer them with these, so both validate and refuse identically.
 */
import {
  type Attempt,
  type AttemptedRollout,
  AttemptPatchSchema,
  EnqueueRolloutRequestSchema,
  IdStringSchema,
  isCanonicalSpan,
  type LightningStore,
  SanitizingSpanSchema,
  type Span,
} from "@agl/core";
import { z } from "zod";
import { badRequest, parseRequest } from "./errors.js";

const StartRolloutBody = EnqueueRolloutRequestSchema.extend({
  worker_id: IdStringSchema.nullable().optional(),
});

/** The body as a JSON object (a 422 naming `what` otherwise). */
export function asObject(body: unknown, what: string): Record<string, unknown> {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return parseRequest(z.record(z.string(), z.unknown()), body, what);
  }
  return body as Record<string, unknown>;
}

/** POST /v1/agl/rollouts (201). */
export function startRollout(store: LightningStore, body: unknown): Promise<AttemptedRollout> {
  return store.startRollout(parseRequest(StartRolloutBody, body));
}

/** POST /v1/agl/spans (201). */
export function addSpan(store: LightningStore, body: unknown): Promise<Span | null> {
  // A complete, valid span (the Python client's full dump) is what the schema would return unchanged:
  // skip zod and the sanitising walk (the store checks it once more on its fast path).
  const span = isCanonicalSpan(body) ? body : parseRequest(SanitizingSpanSchema, body);
  return store.addSpan(span);
}

/** POST /v1/agl/rollouts/{rid}/attempts/{aid} (200); an empty body is an empty patch. */
export function updateAttempt(
  store: LightningStore,
  rid: string,
  aid: string,
  raw: unknown,
): Promise<Attempt> {
  const body = asObject(raw, "");
  for (const [key, value] of Object.entries(body)) {
    if (value === null) throw badRequest(key, "cannot be null");
  }
  return store.updateAttempt(rid, aid, parseRequest(AttemptPatchSchema, body));
}
