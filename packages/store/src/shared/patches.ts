/**
 * How a RolloutPatch / AttemptPatch changes the loaded records, shared by the durable stores so they
 * apply patches in the same order (and so agree with the in-memory store on every edge case).
 */
import {
  type Attempt,
  type AttemptPatchSchema,
  assertRolloutTransition,
  type Rollout,
  type RolloutPatchSchema,
} from "@agl/core";
import type { z } from "zod";
import type { RolloutMutation } from "./rollout-mutation.js";

/**
 * Check the requested status change, then copy the patched fields onto `rollout`. The status itself is
 * applied afterwards through RolloutMutation, once the new config (timeouts) is stored, because the
 * watchdog deadline is recomputed from it.
 */
export function applyRolloutFields(rollout: Rollout, patch: z.output<typeof RolloutPatchSchema>): void {
  if (patch.status !== undefined) assertRolloutTransition(rollout.rollout_id, rollout.status, patch.status);
  if ("input" in patch) rollout.input = patch.input;
  if (patch.mode !== undefined) rollout.mode = patch.mode;
  if (patch.resources_id !== undefined) rollout.resources_id = patch.resources_id;
  if (patch.config !== undefined) rollout.config = patch.config;
  if (patch.metadata !== undefined) rollout.metadata = patch.metadata;
}

/** Apply an attempt patch through the mutation, so status, activity and worker effects follow the state machine. */
export function applyAttemptPatch(
  m: RolloutMutation,
  attempt: Attempt,
  patch: z.output<typeof AttemptPatchSchema>,
): void {
  m.touch(attempt);
  if (patch.worker_id !== undefined) attempt.worker_id = patch.worker_id;
  if (patch.metadata !== undefined) attempt.metadata = patch.metadata;
  if (patch.status !== undefined) {
    if (patch.last_heartbeat_time !== undefined) attempt.last_heartbeat_time = patch.last_heartbeat_time;
    m.setAttemptStatus(attempt, patch.status);
  } else if (patch.last_heartbeat_time !== undefined) {
    // A bare heartbeat is a sign of life, exactly like a span.
    m.recordActivity(attempt, patch.last_heartbeat_time);
  } else if (patch.worker_id !== undefined) {
    m.syncWorker(attempt);
  }
}
