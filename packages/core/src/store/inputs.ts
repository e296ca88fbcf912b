/**
 * Zod schemas for the arguments of LightningStore methods that are not wire models themselves, shared
 * by every store implementation so that bad input fails the same way (InvalidArgumentError naming the
 * field) whichever store is behind the interface; plus `copyData`, the deep copy stores use at their
 * boundaries.
 */
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { InvalidArgumentError } from "../errors.js";
import { EnqueueRolloutRequestSchema } from "../types/rollout.js";

export const StoreIdSchema = z.string().min(1);
const OptionalWorkerId = z.string().min(1).nullish();
export const StartRolloutRequestSchema = EnqueueRolloutRequestSchema.extend({ worker_id: OptionalWorkerId });
export const WorkerOptionSchema = z.object({ workerId: OptionalWorkerId }).strict();
export const DequeueManyOptionsSchema = z
  .object({ limit: z.number().int(), workerId: OptionalWorkerId })
  .strict();
export const WaitForRolloutsSchema = z.object({
  rolloutIds: z.array(z.string()),
  /** Seconds; <= 0 checks once, null/absent waits forever. */
  timeoutSeconds: z.number().nullish(),
});
export const SequencePairsSchema = z.array(z.tuple([z.string(), z.string()]));
export const WorkerUpdateSchema = z
  .object({ heartbeat_stats: z.record(z.string(), z.any()).nullish() })
  .strict();
export const ReadableSpanInputSchema = z.custom<ReadableSpan>(
  (v) => typeof v === "object" && v !== null && typeof (v as ReadableSpan).spanContext === "function",
  "must be an OpenTelemetry ReadableSpan",
);

/** Deep copy; a value that cannot be copied (functions, symbols) is rejected naming `field`. */
export function copyData<T>(value: T, field = ""): T {
  try {
    return structuredClone(value);
  } catch (error) {
    throw new InvalidArgumentError(field, `must be plain data (${(error as Error).message})`);
  }
}
