/**
 * Argument schemas of the LightningStore methods, identical to the in-memory store's, so that the
 * durable stores reject exactly the same inputs with the same field names.
 */
import {
  DequeueManyOptionsSchema,
  InvalidArgumentError,
  OtelSpanSequenceIdSchema,
  ReadableSpanInputSchema,
  SequencePairsSchema,
  StartRolloutRequestSchema,
  StoreIdSchema,
  WaitForRolloutsSchema,
  WorkerOptionSchema,
} from "@agl/core";
import { z } from "zod";

// The argument schemas shared with the in-memory store (@agl/core), under this package's names.
export const IdSchema = StoreIdSchema;
export const StartRolloutSchema = StartRolloutRequestSchema;
export const DequeueOptionsSchema = WorkerOptionSchema;
export const DequeueManySchema = DequeueManyOptionsSchema;
export const WaitSchema = WaitForRolloutsSchema;
export const SeqPairsSchema = SequencePairsSchema;
export const ReadableSpanSchema = ReadableSpanInputSchema;
export { WorkerUpdateSchema } from "@agl/core";
export const SequenceIdSchema = OtelSpanSequenceIdSchema;

/** Options shared by the durable stores. */
export const DurableStoreOptionsSchema = z.object({
  /** Arm a background timer for watchdog deadlines (default true). */
  watchdog: z.boolean().optional(),
  /**
   * Longest the watchdog timer sleeps (ms, default 2000), so that deadlines written by other
   * processes sharing the database are noticed even when this instance did not write them.
   */
  watchdogMaxSleepMs: z.number().int().positive().optional(),
  /** How often waitForRollouts re-reads the database for changes made by other processes (ms, default 500). */
  waitPollIntervalMs: z.number().int().positive().optional(),
});
export type DurableStoreOptions = z.input<typeof DurableStoreOptionsSchema>;

export const DEFAULT_WATCHDOG_MAX_SLEEP_MS = 2000;
export const DEFAULT_WAIT_POLL_INTERVAL_MS = 500;

/** JSON text of a value; `undefined` (an absent rollout input) is kept apart from JSON null as SQL NULL. */
export function toJson(value: unknown, field = ""): string | null {
  if (value === undefined) return null;
  try {
    return JSON.stringify(value);
  } catch (error) {
    throw new InvalidArgumentError(field, `must be plain JSON data (${(error as Error).message})`);
  }
}

/** JSON text of a value that must be present (config, metadata, resources, spans). */
export function toJsonRequired(value: unknown, field = ""): string {
  return toJson(value, field) ?? "null";
}
