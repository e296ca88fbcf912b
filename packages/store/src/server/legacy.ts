/**
 * The legacy v0.1 task API (AgentLightningServer: GET /task, GET /resources/latest|{id}, POST /rollout)
 * on top of the same store, for VERL "v0"-mode clients. A claim is a dequeue; a posted result is a
 * reward span plus the attempt succeeding.
 *
 * Claims that get no result are requeued by the store's own watchdog, not by this server: the claim
 * writes the task timeout into the rollout's config (timeout_seconds, with `timeout` retried), so the
 * deadline lives in the database. It survives a server restart, holds for every server on the same
 * database, and the durable stores' shared watchdog times the attempt out exactly once.
 */
import {
  type AttemptedRollout,
  isQueuingLike,
  isTerminalAttemptStatus,
  type LightningStore,
  newSpanId,
  newTraceId,
  nowSeconds,
  type RolloutConfig,
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

/**
 * The config that makes the store's watchdog requeue this claim after `taskTimeout` seconds: the
 * attempt times out (a shorter timeout of the rollout's own is kept), `timeout` is retried, and
 * max_attempts leaves room for one more claim, so a task is requeued as often as it times out (v0.1).
 * Null when the config already does all that.
 */
export function legacyClaimConfig(claimed: AttemptedRollout, taskTimeout: number): RolloutConfig | null {
  const config = claimed.config;
  const timeout = Math.min(config.timeout_seconds ?? Number.POSITIVE_INFINITY, taskTimeout);
  const maxAttempts = Math.max(config.max_attempts, claimed.attempt.sequence_id + 1);
  const retries = config.retry_condition.includes("timeout");
  if (timeout === config.timeout_seconds && maxAttempts === config.max_attempts && retries) return null;
  return {
    ...config,
    timeout_seconds: timeout,
    max_attempts: maxAttempts,
    retry_condition: retries ? config.retry_condition : [...config.retry_condition, "timeout"],
  };
}

export function registerLegacyRoutes(app: Hono, store: LightningStore, options: LegacyOptions): void {
  app.get("/task", async (c) => {
    const claimed = await store.dequeueRollout({ workerId: c.req.query("worker_id") ?? null });
    if (!claimed) return c.json({ is_available: false, task: null });
    const config = legacyClaimConfig(claimed, options.taskTimeoutSeconds);
    if (config) await store.updateRollout(claimed.rollout_id, { config });
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
    let latest = await store.getLatestAttempt(rolloutId);
    if (!latest) {
      return c.json(
        {
          detail: `Rollout ${rolloutId} was never claimed`,
          error_type: "IllegalTransitionError",
          field: "rollout_id",
        },
        409,
      );
    }
    // A result for a rollout requeued after its claim timed out still counts (the v0.1 behaviour).
    // The timed-out attempt cannot change any more, so the result goes on a fresh attempt.
    if (isQueuingLike(rollout.status)) {
      if (isTerminalAttemptStatus(latest.status)) latest = (await store.startAttempt(rolloutId)).attempt;
      else await store.updateRollout(rolloutId, { status: "running" });
    }
    const attemptId = latest.attempt_id;
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
