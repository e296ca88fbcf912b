import { z } from "zod";
import type { AgentLike } from "../agent/types.js";
import { MIN_TOKEN_SECRET_BYTES } from "../auth/scoped-token.js";
import { isLogger, type Logger } from "../logger.js";
import { isLightningStore } from "../options.js";
import type { LightningStore } from "../store/store.js";
import { LightningTracer } from "../tracing/tracer.js";

export const RunnerOptionsSchema = z.object({
  store: z.custom<LightningStore>(isLightningStore, "must be a LightningStore"),
  agent: z.custom<AgentLike>(
    (v) => typeof v === "function" || (typeof v === "object" && v !== null),
    "must be an agent",
  ),
  /** Rollouts run at the same time by this runner. */
  concurrency: z.number().int().min(1).default(1),
  workerId: z.string().min(1).optional(),
  /** Wait between dequeue attempts when the queue is empty (±25% jitter). */
  pollIntervalMs: z.number().min(0).default(1000),
  /** Attempt and worker heartbeats. */
  heartbeatIntervalSeconds: z.number().positive().default(10),
  /** Stop after claiming this many rollouts. */
  maxRollouts: z.number().int().min(1).nullish(),
  /**
   * On abort, how long in-flight rollouts may still finish before they are marked failed; also how long
   * an agent whose attempt the store ended (timeout, cancelled) may take to return after its signal is
   * aborted before it is abandoned and its slot reused.
   */
  gracePeriodMs: z.number().min(0).default(5000),
  /**
   * Deadline of an attempt whose rollout config has no `timeout_seconds`: past it the attempt is marked
   * `timeout` and the agent's signal aborted. Default none (the rollout's own timeout only).
   */
  defaultTimeoutSeconds: z.number().positive().nullish(),
  /**
   * The LLM proxy's token secret (`LLMProxy.tokenSecret`). When set, every ProxyLLM an agent receives
   * carries, as its api_key, a token the proxy accepts only for that rollout attempt.
   */
  proxyTokenSecret: z
    .string()
    .refine((s) => Buffer.byteLength(s) >= MIN_TOKEN_SECRET_BYTES, {
      message: `must be at least ${MIN_TOKEN_SECRET_BYTES} bytes`,
    })
    .optional(),
  /**
   * Waits between retries of an attempt's unacknowledged span writes and of its final status update
   * (default ~16 s in all). An attempt whose spans are still not all stored after them is failed.
   */
  storeRetryDelaysMs: z.array(z.number().min(0)).optional(),
  tracer: z.custom<LightningTracer>(LightningTracer.isInstance, "must be a LightningTracer").optional(),
  logger: z.custom<Logger>(isLogger, "must have debug/info/warn/error methods").optional(),
});
export type RunnerOptions = z.input<typeof RunnerOptionsSchema>;

export interface RunnerSummary {
  workerId: string;
  /** Rollouts claimed (dequeued or started) by this runner. */
  claimed: number;
  succeeded: number;
  failed: number;
  /** Attempts that were finished elsewhere meanwhile (e.g. timed out by the watchdog); result discarded. */
  stale: number;
  /**
   * Agents still running when their grace period ended, after a stop (their attempts are marked failed)
   * or after the store ended their attempt (these count in `stale` too); their slots were freed.
   */
  abandoned: number;
  durationSeconds: number;
}

export type AttemptOutcome =
  | { status: "succeeded" }
  | { status: "failed"; error: unknown }
  | { status: "stale"; reason: string; abandoned?: boolean }
  | { status: "abandoned" };
