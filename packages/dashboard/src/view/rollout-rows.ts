import { finalReward } from "@agl/adapter";
import type { AttemptedRollout, Rollout, RolloutStatus, Span } from "@agl/core";

/** One line of the rollouts table. */
export interface RolloutRow {
  rolloutId: string;
  status: RolloutStatus;
  mode: string;
  /** Number of attempts so far (the latest attempt's sequence id); 0 while queuing for the first time. */
  attempts: number;
  latestAttemptStatus: string | null;
  workerId: string | null;
  startTime: number;
  /** Seconds; running rollouts count up to `now`. */
  durationSeconds: number | null;
  resourcesId: string | null;
  dataId: string | null;
  /** undefined: not loaded yet; null: no reward span. */
  reward: number | null | undefined;
}

export const ROLLOUT_STATUSES: readonly RolloutStatus[] = [
  "queuing",
  "preparing",
  "running",
  "succeeded",
  "failed",
  "cancelled",
  "requeuing",
];

const TERMINAL = new Set<string>(["succeeded", "failed", "cancelled"]);

export function isTerminal(status: string): boolean {
  return TERMINAL.has(status);
}

/** The sample id GRPO groups by: metadata.data_id (Agent Lightning's trainer) or a task's own id field. */
export function dataIdOf(rollout: Rollout): string | null {
  const meta = rollout.metadata ?? {};
  for (const key of ["data_id", "dataId"]) {
    const v = (meta as Record<string, unknown>)[key];
    if (typeof v === "string" || typeof v === "number") return String(v);
  }
  return null;
}

export function toRolloutRow(rollout: Rollout | AttemptedRollout, nowSeconds: number): RolloutRow {
  const attempt = "attempt" in rollout ? rollout.attempt : null;
  const end = rollout.end_time ?? (isTerminal(rollout.status) ? null : nowSeconds);
  return {
    rolloutId: rollout.rollout_id,
    status: rollout.status,
    mode: rollout.mode ?? "–",
    attempts: attempt?.sequence_id ?? 0,
    latestAttemptStatus: attempt?.status ?? null,
    workerId: attempt?.worker_id ?? null,
    startTime: rollout.start_time,
    durationSeconds: end === null ? null : Math.max(0, end - rollout.start_time),
    resourcesId: rollout.resources_id,
    dataId: dataIdOf(rollout),
    reward: undefined,
  };
}

/** A rollout's reward from its reward spans (the last one wins, as in Agent Lightning's trainer). */
export function rewardFromSpans(spans: readonly Span[]): number | null {
  return finalReward(spans);
}

export interface RowFilter {
  mode?: string;
  dataId?: string;
}

/**
 * Mode and data id are not filters of the v0.3 query API: against a Python Agent Lightning server
 * they narrow the rows of the page the store returned (an agl-ts store filters them itself).
 */
export function filterRows(rows: readonly RolloutRow[], filter: RowFilter): RolloutRow[] {
  return rows.filter(
    (r) => (!filter.mode || r.mode === filter.mode) && (!filter.dataId || r.dataId?.includes(filter.dataId)),
  );
}
