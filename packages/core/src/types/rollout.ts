import { z } from "zod";
import {
  IdStringSchema,
  MAX_ENQUEUE_BATCH,
  MAX_STORED_INT,
  StorableJsonSchema,
  StorableRecordSchema,
} from "./input-rules.js";

export const RolloutStatusSchema = z.enum([
  "queuing",
  "preparing",
  "running",
  "failed",
  "succeeded",
  "cancelled",
  "requeuing",
]);
export type RolloutStatus = z.infer<typeof RolloutStatusSchema>;

export const AttemptStatusSchema = z.enum([
  "preparing",
  "running",
  "failed",
  "succeeded",
  "unresponsive",
  "timeout",
]);
export type AttemptStatus = z.infer<typeof AttemptStatusSchema>;

export const RolloutModeSchema = z.enum(["train", "val", "test"]);
export type RolloutMode = z.infer<typeof RolloutModeSchema>;

/** Epoch seconds (float). */
const Time = z.number().finite();

export const RolloutConfigSchema = z.object({
  timeout_seconds: z.number().positive().nullable().default(null),
  unresponsive_seconds: z.number().positive().nullable().default(null),
  max_attempts: z.number().int().min(1).max(MAX_STORED_INT).default(1),
  retry_condition: z.array(AttemptStatusSchema).default([]),
});
export type RolloutConfig = z.infer<typeof RolloutConfigSchema>;
export type RolloutConfigInput = z.input<typeof RolloutConfigSchema>;

export const RolloutSchema = z.object({
  rollout_id: z.string().min(1),
  input: z.any(),
  start_time: Time,
  end_time: Time.nullable().default(null),
  mode: RolloutModeSchema.nullable().default(null),
  resources_id: z.string().nullable().default(null),
  status: RolloutStatusSchema.default("queuing"),
  config: RolloutConfigSchema.default(() => RolloutConfigSchema.parse({})),
  metadata: z
    .record(z.string(), z.any())
    .nullable()
    .default(() => ({})),
});
export type Rollout = z.infer<typeof RolloutSchema>;

export const AttemptSchema = z.object({
  rollout_id: z.string().min(1),
  attempt_id: z.string().min(1),
  sequence_id: z.number().int().min(1),
  start_time: Time,
  end_time: Time.nullable().default(null),
  status: AttemptStatusSchema.default("preparing"),
  worker_id: z.string().nullable().default(null),
  last_heartbeat_time: Time.nullable().default(null),
  metadata: z
    .record(z.string(), z.any())
    .nullable()
    .default(() => ({})),
});
export type Attempt = z.infer<typeof AttemptSchema>;

export const AttemptedRolloutSchema = RolloutSchema.extend({ attempt: AttemptSchema }).superRefine(
  (v, ctx) => {
    if (v.attempt.rollout_id !== v.rollout_id) {
      ctx.addIssue({
        code: "custom",
        path: ["attempt", "rollout_id"],
        message: `must equal rollout_id (${v.rollout_id})`,
      });
    }
  },
);
export type AttemptedRollout = z.infer<typeof AttemptedRolloutSchema>;

export const EnqueueRolloutRequestSchema = z.object({
  input: StorableJsonSchema,
  mode: RolloutModeSchema.nullable().optional(),
  resources_id: IdStringSchema.nullable().optional(),
  config: RolloutConfigSchema.nullable().optional(),
  metadata: StorableRecordSchema.nullable().optional(),
});
export type EnqueueRolloutRequest = z.input<typeof EnqueueRolloutRequestSchema>;
/** One `enqueueManyRollouts` call: at most MAX_ENQUEUE_BATCH requests (enqueue more in several calls). */
export const EnqueueBatchSchema = z.array(EnqueueRolloutRequestSchema).max(MAX_ENQUEUE_BATCH);

/** Fields of `updateRollout`; a key that is present is set (null included), an absent key is left alone. */
export const RolloutPatchSchema = z.object({
  input: StorableJsonSchema.optional(),
  mode: RolloutModeSchema.nullable().optional(),
  resources_id: IdStringSchema.nullable().optional(),
  status: RolloutStatusSchema.optional(),
  config: RolloutConfigSchema.optional(),
  metadata: StorableRecordSchema.nullable().optional(),
});
export type RolloutPatch = z.input<typeof RolloutPatchSchema>;

/** Fields of `updateAttempt`; present keys are set. A `last_heartbeat_time` counts as a liveness heartbeat. */
export const AttemptPatchSchema = z.object({
  status: AttemptStatusSchema.optional(),
  worker_id: IdStringSchema.optional(),
  last_heartbeat_time: Time.optional(),
  metadata: StorableRecordSchema.optional(),
});
export type AttemptPatch = z.input<typeof AttemptPatchSchema>;
