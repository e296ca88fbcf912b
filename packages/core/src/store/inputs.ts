/**
 * Zod schemas for the arguments of LightningStore methods that are not wire models themselves, shared
 * by every store implementation so that bad input fails the same way (InvalidArgumentError naming the
 * field) whichever store is behind the interface; plus `copyData`, the deep copy stores use at their
 * boundaries.
 */
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { InvalidArgumentError } from "../errors.js";
import {
  IdStringSchema,
  MAX_DEQUEUE_LIMIT,
  MAX_IDS_PER_CALL,
  MAX_SPAN_SEQUENCE_ID,
  StorableRecordSchema,
  StorableStringSchema,
} from "../types/input-rules.js";
import { EnqueueRolloutRequestSchema } from "../types/rollout.js";

export const StoreIdSchema = IdStringSchema;
const OptionalWorkerId = IdStringSchema.nullish();
export const StartRolloutRequestSchema = EnqueueRolloutRequestSchema.extend({ worker_id: OptionalWorkerId });
export const WorkerOptionSchema = z.object({ workerId: OptionalWorkerId }).strict();
/** A batch larger than MAX_DEQUEUE_LIMIT is clamped, not refused (a dequeue returns "up to limit"). */
export const DequeueManyOptionsSchema = z
  .object({
    limit: z
      .number()
      .int()
      .transform((n) => Math.min(n, MAX_DEQUEUE_LIMIT)),
    workerId: OptionalWorkerId,
  })
  .strict();
/** Duck-typed so that signals from another realm or polyfill pass; kept by reference, never copied. */
export const AbortSignalSchema = z.custom<AbortSignal>(
  (v) =>
    typeof v === "object" &&
    v !== null &&
    typeof (v as AbortSignal).aborted === "boolean" &&
    typeof (v as AbortSignal).addEventListener === "function" &&
    typeof (v as AbortSignal).removeEventListener === "function",
  "must be an AbortSignal",
);
export const WaitForRolloutsSchema = z.object({
  rolloutIds: z.array(StorableStringSchema).max(MAX_IDS_PER_CALL),
  /** Seconds; <= 0 checks once, null/absent waits forever. */
  timeoutSeconds: z.number().nullish(),
  signal: AbortSignalSchema.optional(),
});
export const SequencePairsSchema = z.array(z.tuple([IdStringSchema, IdStringSchema])).max(MAX_IDS_PER_CALL);
export const WorkerUpdateSchema = z.object({ heartbeat_stats: StorableRecordSchema.nullish() }).strict();
/** The optional sequence id of `addOtelSpan` (the store hands one out when absent). */
export const OtelSpanSequenceIdSchema = z.number().int().min(1).max(MAX_SPAN_SEQUENCE_ID).optional();
export const ReadableSpanInputSchema = z.custom<ReadableSpan>(
  (v) => typeof v === "object" && v !== null && typeof (v as ReadableSpan).spanContext === "function",
  "must be an OpenTelemetry ReadableSpan",
);

/**
 * Deep copy; a value that cannot be copied (functions, symbols) is rejected naming `field`.
 * Stores copy at every boundary, so this is on every write and read: plain JSON-like data (what spans,
 * inputs and metadata almost always are) is copied by a direct walk, several times cheaper than
 * `structuredClone` and with less garbage. Like `structuredClone` it keeps shared references shared
 * (the proxy's spans hold each token-id list under two keys) and copies cycles. Anything else (Dates, Maps,
 * typed arrays, class instances, very deep nesting) falls back to `structuredClone` of the whole value,
 * whose semantics are the contract.
 */
export function copyData<T>(value: T, field = ""): T {
  if (typeof value !== "object" || value === null) {
    if (typeof value === "function" || typeof value === "symbol") return structuredCopy(value, field);
    return value;
  }
  const fast = plainCopy(value, 0, new Map());
  return fast === NOT_PLAIN ? structuredCopy(value, field) : (fast as T);
}

function structuredCopy<T>(value: T, field: string): T {
  try {
    return structuredClone(value);
  } catch (error) {
    throw new InvalidArgumentError(field, `must be plain data (${(error as Error).message})`);
  }
}

const NOT_PLAIN = Symbol("not plain");
/** Deeper values go to structuredClone, which does not recurse on the JS stack. */
const MAX_PLAIN_DEPTH = 64;

function plainCopy(value: unknown, depth: number, seen: Map<object, unknown>): unknown {
  const t = typeof value;
  if (t === "string" || t === "number" || t === "boolean" || value === null || value === undefined)
    return value;
  if (t !== "object" || depth > MAX_PLAIN_DEPTH) return NOT_PLAIN;
  const done = seen.get(value as object);
  if (done !== undefined) return done;
  if (Array.isArray(value)) {
    if (Object.getPrototypeOf(value) !== Array.prototype) return NOT_PLAIN;
    const n = value.length;
    // lists of numbers (token ids, logprobs) are most of the bytes: copy them in one native call
    let flat = true;
    for (let i = 0; i < n && flat; i++) flat = typeof value[i] === "number";
    if (flat) {
      const out = value.slice();
      seen.set(value, out);
      return out;
    }
    const out = new Array(n);
    seen.set(value, out);
    for (let i = 0; i < n; i++) {
      if (!(i in value)) return NOT_PLAIN; // holes: structuredClone keeps them
      const v = value[i];
      if (typeof v === "number" || typeof v === "string") out[i] = v;
      else {
        const c = plainCopy(v, depth + 1, seen);
        if (c === NOT_PLAIN) return NOT_PLAIN;
        out[i] = c;
      }
    }
    return out;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return NOT_PLAIN;
  const out: Record<string, unknown> = {};
  seen.set(value as object, out);
  for (const key in value as Record<string, unknown>) {
    if (key === "__proto__") return NOT_PLAIN; // an own "__proto__" key (JSON.parse makes them) must stay data
    const v = (value as Record<string, unknown>)[key];
    const c = plainCopy(v, depth + 1, seen);
    if (c === NOT_PLAIN) return NOT_PLAIN;
    out[key] = c;
  }
  return out;
}
