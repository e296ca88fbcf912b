/**
 * The rollout/attempt state machine (Agent Lightning v0.3 §1.1) as pure functions, shared by every
 * store implementation so that in-memory, SQLite and PostgreSQL agree by construction.
 *
 * Deliberate differences from the reference: illegal transitions are rejected, terminal attempt
 * statuses (failed/succeeded/timeout) all get an end_time, liveness counts heartbeats as well as spans,
 * and a run of a rollout has at most one succeeded attempt ({@link settleSuccess}).
 */
import { IllegalTransitionError } from "../errors.js";
import type { WorkerStatus } from "../types/misc.js";
import type { Attempt, AttemptStatus, Rollout, RolloutStatus } from "../types/rollout.js";

export const TERMINAL_ROLLOUT_STATUSES: ReadonlySet<RolloutStatus> = new Set([
  "failed",
  "succeeded",
  "cancelled",
]);
export const TERMINAL_ATTEMPT_STATUSES: ReadonlySet<AttemptStatus> = new Set([
  "failed",
  "succeeded",
  "timeout",
]);

export const isTerminalRolloutStatus = (s: RolloutStatus): boolean => TERMINAL_ROLLOUT_STATUSES.has(s);
export const isQueuingLike = (s: RolloutStatus): boolean => s === "queuing" || s === "requeuing";
export const isRunningLike = (s: RolloutStatus): boolean => s === "preparing" || s === "running";
export const isTerminalAttemptStatus = (s: AttemptStatus): boolean => TERMINAL_ATTEMPT_STATUSES.has(s);

const ROLLOUT_TRANSITIONS: Record<RolloutStatus, ReadonlySet<RolloutStatus>> = {
  queuing: new Set(["preparing", "running", "cancelled", "failed", "requeuing"]),
  requeuing: new Set(["preparing", "running", "cancelled", "failed", "queuing"]),
  preparing: new Set(["running", "succeeded", "failed", "requeuing", "queuing", "cancelled"]),
  running: new Set(["preparing", "succeeded", "failed", "requeuing", "queuing", "cancelled"]),
  // A finished rollout can only be explicitly re-run (queued again), or retried by startAttempt.
  failed: new Set(["queuing", "requeuing", "preparing"]),
  succeeded: new Set(["queuing", "requeuing", "preparing"]),
  cancelled: new Set(["queuing", "requeuing", "preparing"]),
};

const ATTEMPT_TRANSITIONS: Record<AttemptStatus, ReadonlySet<AttemptStatus>> = {
  preparing: new Set(["running", "succeeded", "failed", "timeout", "unresponsive"]),
  running: new Set(["succeeded", "failed", "timeout", "unresponsive"]),
  unresponsive: new Set(["running", "succeeded", "failed", "timeout"]),
  failed: new Set(),
  succeeded: new Set(),
  timeout: new Set(),
};

export function canTransitionRollout(from: RolloutStatus, to: RolloutStatus): boolean {
  return from === to || ROLLOUT_TRANSITIONS[from].has(to);
}

export function canTransitionAttempt(from: AttemptStatus, to: AttemptStatus): boolean {
  return from === to || ATTEMPT_TRANSITIONS[from].has(to);
}

export function assertRolloutTransition(rolloutId: string, from: RolloutStatus, to: RolloutStatus): void {
  if (!canTransitionRollout(from, to)) throw new IllegalTransitionError("rollout", rolloutId, from, to);
}

export function assertAttemptTransition(attemptId: string, from: AttemptStatus, to: AttemptStatus): void {
  if (!canTransitionAttempt(from, to)) throw new IllegalTransitionError("attempt", attemptId, from, to);
}

/**
 * The rollout status implied by its latest attempt moving to `attemptStatus`: preparing, running and
 * succeeded are mirrored; failed/timeout/unresponsive requeue when the status is in retry_condition
 * and attempts remain, else fail the rollout.
 */
export function rolloutStatusForAttempt(
  rollout: Pick<Rollout, "config">,
  attempt: Pick<Attempt, "sequence_id">,
  attemptStatus: AttemptStatus,
): RolloutStatus {
  switch (attemptStatus) {
    case "preparing":
    case "running":
    case "succeeded":
      return attemptStatus;
    default: {
      const retryable =
        rollout.config.retry_condition.includes(attemptStatus) &&
        attempt.sequence_id < rollout.config.max_attempts;
      return retryable ? "requeuing" : "failed";
    }
  }
}

/**
 * What a stored span (or heartbeat) does: the attempt comes alive (preparing/unresponsive → running),
 * and for the latest attempt a preparing or requeuing rollout becomes running. Terminal statuses are kept.
 */
export function statusesAfterActivity(
  rolloutStatus: RolloutStatus,
  attemptStatus: AttemptStatus,
  isLatestAttempt: boolean,
): { rollout: RolloutStatus; attempt: AttemptStatus } {
  const attempt =
    attemptStatus === "preparing" || attemptStatus === "unresponsive" ? "running" : attemptStatus;
  const rollout =
    isLatestAttempt &&
    attempt === "running" &&
    (rolloutStatus === "preparing" || rolloutStatus === "requeuing")
      ? "running"
      : rolloutStatus;
  return { rollout, attempt };
}

/**
 * The watchdog's verdict on the latest attempt of a running-like rollout at time `now` (seconds):
 * `timeout` past timeout_seconds since the attempt started; `unresponsive` when the last sign of life
 * (span or heartbeat; the start when none) is older than unresponsive_seconds; else null.
 */
export function watchdogVerdict(
  rollout: Pick<Rollout, "config" | "status">,
  attempt: Pick<Attempt, "start_time" | "last_heartbeat_time" | "status">,
  now: number,
): "timeout" | "unresponsive" | null {
  if (!isRunningLike(rollout.status) || isTerminalAttemptStatus(attempt.status)) return null;
  const { timeout_seconds, unresponsive_seconds } = rollout.config;
  if (timeout_seconds != null && now - attempt.start_time > timeout_seconds) return "timeout";
  if (unresponsive_seconds != null && attempt.status !== "unresponsive") {
    const lastAlive = attempt.last_heartbeat_time ?? attempt.start_time;
    if (now - lastAlive > unresponsive_seconds) return "unresponsive";
  }
  return null;
}

/** When the watchdog should next look at this attempt (epoch seconds), or null if never. */
export function nextWatchdogDeadline(
  rollout: Pick<Rollout, "config" | "status">,
  attempt: Pick<Attempt, "start_time" | "last_heartbeat_time" | "status">,
): number | null {
  if (!isRunningLike(rollout.status) || isTerminalAttemptStatus(attempt.status)) return null;
  const { timeout_seconds, unresponsive_seconds } = rollout.config;
  const candidates: number[] = [];
  if (timeout_seconds != null) candidates.push(attempt.start_time + timeout_seconds);
  if (unresponsive_seconds != null && attempt.status !== "unresponsive") {
    candidates.push((attempt.last_heartbeat_time ?? attempt.start_time) + unresponsive_seconds);
  }
  return candidates.length ? Math.min(...candidates) : null;
}

/**
 * How a worker changes when an attempt it runs changes: succeeded/failed → idle; timeout/unresponsive →
 * unknown (both clear current_*); otherwise busy on this attempt.
 */
export function workerStatusForAttempt(status: AttemptStatus): {
  status: WorkerStatus;
  clearCurrent: boolean;
} {
  if (status === "succeeded" || status === "failed") return { status: "idle", clearCurrent: true };
  if (status === "timeout" || status === "unresponsive") return { status: "unknown", clearCurrent: true };
  return { status: "busy", clearCurrent: false };
}

/** The attempt's end_time after moving to `status`. */
export function attemptEndTime(status: AttemptStatus, previous: number | null, now: number): number | null {
  return isTerminalAttemptStatus(status) ? (previous ?? now) : null;
}

/**
 * The rollout status after its latest attempt moves to `attemptStatus` ({@link rolloutStatusForAttempt}),
 * unless the state machine forbids that rollout transition (e.g. a late "succeeded" for a rollout already
 * cancelled or failed): then the rollout keeps its status. The attempt change itself still applies.
 * A success of an unfinished rollout always finishes it, even from `requeuing` (an attempt marked
 * unresponsive whose result arrives before the retry started): a late success wins.
 */
export function rolloutStatusAfterAttempt(
  rollout: Pick<Rollout, "config" | "status">,
  attempt: Pick<Attempt, "sequence_id">,
  attemptStatus: AttemptStatus,
): RolloutStatus {
  if (attemptStatus === "succeeded" && !isTerminalRolloutStatus(rollout.status)) return "succeeded";
  const target = rolloutStatusForAttempt(rollout, attempt, attemptStatus);
  return canTransitionRollout(rollout.status, target) ? target : rollout.status;
}

/** What an attempt's success does beyond the attempt itself ({@link settleSuccess}). */
export type SuccessEffect =
  /** Not a new success, or the latest attempt's own: the usual rules apply. */
  | { kind: "usual" }
  /** An older attempt's late success: the rollout succeeds and its live latest attempt is superseded. */
  | { kind: "late-win" }
  /** The rollout already succeeded with another attempt: refused, nothing changes. */
  | { kind: "refused"; reason: string };

/**
 * A rollout has at most one succeeded attempt per run, and a late success is never lost silently.
 * Agent Lightning lets a late success win, and so do the stores:
 * - an older attempt (e.g. one marked `unresponsive` and retried) that succeeds while its rollout is
 *   not finished finishes the rollout (`succeeded`); the newer attempt still running is superseded:
 *   it becomes `failed` (metadata.error.type "Superseded"), so its own later report is refused;
 * - a success reported by any attempt but the latest once the rollout has succeeded is refused with
 *   IllegalTransitionError (HTTP 409), so of two attempts racing to report, exactly one wins.
 * The latest attempt's success follows {@link rolloutStatusAfterAttempt}. A rollout queued again
 * explicitly after it succeeded (updateRollout to queuing, or startAttempt) starts a new run.
 */
export function settleSuccess(
  rollout: Pick<Rollout, "status">,
  attempt: Pick<Attempt, "status">,
  to: AttemptStatus,
  isLatest: boolean,
): SuccessEffect {
  if (to !== "succeeded" || attempt.status === "succeeded" || isLatest) return { kind: "usual" };
  if (rollout.status === "succeeded") {
    return { kind: "refused", reason: "another attempt of its rollout already succeeded" };
  }
  return isTerminalRolloutStatus(rollout.status) ? { kind: "usual" } : { kind: "late-win" };
}

/** The metadata of a latest attempt superseded by an older attempt's late success. */
export function supersededMetadata(
  metadata: Record<string, unknown> | null | undefined,
  winnerAttemptId: string,
): Record<string, unknown> {
  return {
    ...(metadata ?? {}),
    error: {
      type: "Superseded",
      message: `attempt ${winnerAttemptId} of this rollout succeeded late; this attempt's result is not used`,
    },
  };
}

/**
 * The rollout's end_time after moving to `status`: set (kept if already set) on terminal statuses,
 * cleared otherwise, so a rollout that is run again does not carry a stale end_time.
 */
export function rolloutEndTime(status: RolloutStatus, previous: number | null, now: number): number | null {
  return isTerminalRolloutStatus(status) ? (previous ?? now) : null;
}
