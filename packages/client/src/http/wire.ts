/**
 * The answer schemas of the store routes, built once: constructing zod schemas per call (e.g.
 * `z.array(SpanSchema)` inline) was ~5% of the client's CPU on the store's hot path.
 */
import {
  type Attempt,
  type AttemptedRollout,
  AttemptedRolloutSchema,
  AttemptSchema,
  InvalidArgumentError,
  paginatedSchema,
  ResourcesUpdateSchema,
  type Rollout,
  RolloutSchema,
  type Span,
  SpanSchema,
  WorkerSchema,
} from "@agl/core";
import { z } from "zod";
import { type Shape, trustedArray, trustedObject } from "./trusted.js";

export const RolloutOrAttempted = z.unknown().transform((value, ctx) => {
  const schema =
    typeof value === "object" && value !== null && "attempt" in value
      ? AttemptedRolloutSchema
      : RolloutSchema;
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    for (const issue of parsed.error.issues)
      ctx.addIssue({ ...issue, code: "custom", message: issue.message });
    return z.NEVER;
  }
  return parsed.data as Rollout | AttemptedRollout;
});

export const PaginatedRollouts = paginatedSchema(RolloutOrAttempted);
export const PaginatedAttempts = paginatedSchema(AttemptSchema);
export const PaginatedSpans = paginatedSchema(SpanSchema);
export const PaginatedResources = paginatedSchema(ResourcesUpdateSchema);
export const PaginatedWorkers = paginatedSchema(WorkerSchema);

/** camelCase query options → the wire's snake_case keys, leaving out undefined and null. */
export function wireQuery(query: object | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null) continue;
    out[key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = value;
  }
  return out;
}

export const trustedSequenceIds: Shape<{ sequence_ids: number[] }> = (body, what) => {
  const ids = trustedObject<{ sequence_ids: unknown }>(["sequence_ids"])(body, what).sequence_ids;
  if (!Array.isArray(ids) || !ids.every((id) => Number.isInteger(id))) {
    throw new InvalidArgumentError(`${what}.sequence_ids`, "must be a list of integers");
  }
  return { sequence_ids: ids as number[] };
};

export const StatisticsAnswer = z.record(z.string(), z.unknown());
export const RolloutList = z.array(RolloutSchema);
export const AttemptedRolloutList = z.array(AttemptedRolloutSchema);
export const SpanList = z.array(SpanSchema);
export const MaybeRollout = RolloutOrAttempted.nullable();
export const MaybeAttempt = AttemptSchema.nullable();
export const MaybeResources = ResourcesUpdateSchema.nullable();
export const MaybeSpan = SpanSchema.nullable();
export const MaybeWorker = WorkerSchema.nullable();
export const SequenceIdAnswer = z.object({ sequence_id: z.number().int() });
export const SequenceIdsAnswer = z.object({ sequence_ids: z.array(z.number().int()) });

export const trustedClaims = trustedArray<AttemptedRollout>(["rollout_id", "attempt"]);
export const trustedRollouts = trustedArray<Rollout>(["rollout_id", "status"]);
export const trustedAttempt = trustedObject<Attempt>(["attempt_id", "status"]);
export const trustedSpans = trustedArray<Span>(["span_id", "sequence_id"]);
