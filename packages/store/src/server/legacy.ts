/**
 * The legacy v0.1 task API (AgentLightningServer: GET /task, GET /resources/latest|{id}, POST /rollout)
 * on top of the same store, for VERL "v0"-mode clients. A claim is a dequeue; a posted result is a
 * reward span plus the attempt succeeding; claims older than the task timeout are requeued.
 */
import {
  type AttemptedRollout,
  IllegalTransitionError,
  isQueuingLike,
  isRunningLike,
  type LightningStore,
  NotFoundError,
  newSpanId,
  newTraceId,
  nowSeconds,
} from "@agl/core";
import type { Hono } from "hono";
import { z } from "zod";
import { parseRequest } from "./errors.js";
import { readJsonBody } from "./params.js";

export interface LegacyOptions {
  taskTimeoutSeconds: number;
}

export interface LegacyTask {
  rollout_id: string;
  input: unknown;
  mode: string | null;
  resources_id: string | null;
  create_time: number;
  last_claim_time: number;
  num_claims: number;
  metadata: Record<string, unknown>;
}

const RolloutLegacySchema = z.object({
  rollout_id: z.string().min(1),
  task: z.unknown().optional(),
  final_reward: z.number().nullable().optional(),
  triplets: z.array(z.unknown()).nullable().optional(),
  trace: z.array(z.unknown()).nullable().optional(),
  logs: z.array(z.unknown()).nullable().optional(),
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
});

interface Claim {
  attemptId: string;
  claimedAt: number;
}

export function toLegacyTask(claimed: AttemptedRollout): LegacyTask {
  return {
    rollout_id: claimed.rollout_id,
    input: claimed.input,
    mode: claimed.mode,
    resources_id: claimed.resources_id,
    create_time: claimed.start_time,
    last_claim_time: claimed.attempt.start_time,
    num_claims: claimed.attempt.sequence_id,
    metadata: claimed.metadata ?? {},
  };
}

export function registerLegacyRoutes(app: Hono, store: LightningStore, options: LegacyOptions): void {
  const claims = new Map<string, Claim>();
  // Attempts superseded by a timeout requeue; closed as `timeout` once a newer attempt exists.
  const stale = new Map<string, string[]>();

  async function requeueExpired(): Promise<void> {
    const now = nowSeconds();
    for (const [rolloutId, claim] of claims) {
      if (now - claim.claimedAt <= options.taskTimeoutSeconds) continue;
      claims.delete(rolloutId);
      const rollout = await store.getRolloutById(rolloutId);
      const latest = await store.getLatestAttempt(rolloutId);
      if (!rollout || !latest || latest.attempt_id !== claim.attemptId || !isRunningLike(rollout.status))
        continue;
      try {
        await store.updateRollout(rolloutId, { status: "requeuing" });
      } catch (error) {
        // It finished meanwhile: there is nothing to requeue.
        if (IllegalTransitionError.isInstance(error) || NotFoundError.isInstance(error)) continue;
        throw error;
      }
      stale.set(rolloutId, [...(stale.get(rolloutId) ?? []), claim.attemptId]);
    }
  }

  async function closeStale(rolloutId: string): Promise<void> {
    const ids = stale.get(rolloutId);
    if (!ids) return;
    stale.delete(rolloutId);
    for (const attemptId of ids) {
      try {
        await store.updateAttempt(rolloutId, attemptId, { status: "timeout" });
      } catch (error) {
        // Already finished some other way (e.g. by the store's watchdog): nothing left to close.
        if (!IllegalTransitionError.isInstance(error) && !NotFoundError.isInstance(error)) throw error;
      }
    }
  }

  app.get("/task", async (c) => {
    await requeueExpired();
    const claimed = await store.dequeueRollout({ workerId: c.req.query("worker_id") ?? null });
    if (!claimed) return c.json({ is_available: false, task: null });
    await closeStale(claimed.rollout_id);
    claims.set(claimed.rollout_id, { attemptId: claimed.attempt.attempt_id, claimedAt: nowSeconds() });
    return c.json({ is_available: true, task: toLegacyTask(claimed) });
  });

  app.get("/resources/latest", async (c) => {
    const latest = await store.getLatestResources();
    if (!latest) return c.json({ detail: "No resources have been set", error_type: "NotFoundError" }, 404);
    return c.json(latest);
  });

  app.get("/resources/:id", async (c) => {
    const id = c.req.param("id");
    const found = await store.getResourcesById(id);
    if (!found) {
      return c.json(
        { detail: `Resources ${id} not found`, error_type: "NotFoundError", field: "resources_id" },
        404,
      );
    }
    return c.json(found);
  });

  app.post("/rollout", async (c) => {
    const result = parseRequest(RolloutLegacySchema, await readJsonBody(c, undefined));
    const rolloutId = result.rollout_id;
    const rollout = await store.getRolloutById(rolloutId);
    if (!rollout) {
      return c.json(
        { detail: `Rollout ${rolloutId} not found`, error_type: "NotFoundError", field: "rollout_id" },
        404,
      );
    }
    const attemptId =
      claims.get(rolloutId)?.attemptId ?? (await store.getLatestAttempt(rolloutId))?.attempt_id;
    if (!attemptId) {
      return c.json(
        {
          detail: `Rollout ${rolloutId} was never claimed`,
          error_type: "IllegalTransitionError",
          field: "rollout_id",
        },
        409,
      );
    }
    claims.delete(rolloutId);
    if (result.final_reward != null) {
      const sequenceId = await store.getNextSpanSequenceId(rolloutId, attemptId);
      await store.addSpan({
        rollout_id: rolloutId,
        attempt_id: attemptId,
        sequence_id: sequenceId,
        trace_id: newTraceId(),
        span_id: newSpanId(),
        name: "agentlightning.annotation",
        status: { status_code: "OK", description: null },
        attributes: {
          "agentlightning.reward.0.name": "primary",
          "agentlightning.reward.0.value": result.final_reward,
        },
        start_time: nowSeconds(),
        end_time: nowSeconds(),
      });
    }
    // A result for a rollout requeued after its claim timed out still counts (the v0.1 behaviour).
    if (isQueuingLike(rollout.status)) await store.updateRollout(rolloutId, { status: "running" });
    const legacy = {
      final_reward: result.final_reward ?? null,
      triplets: result.triplets ?? null,
      trace: result.trace ?? null,
      logs: result.logs ?? null,
      metadata: result.metadata ?? null,
    };
    await store.updateAttempt(rolloutId, attemptId, {
      status: "succeeded",
      metadata: { legacy_result: legacy },
    });
    return c.json({ status: "ok", message: `Rollout ${rolloutId} received and stored.`, data: null });
  });
}
