/**
 * The state changes of one rollout inside one database transaction, mirroring the in-memory engine
 * of @agl/core step by step. Status logic comes only from the shared pure functions of
 * `@agl/core`'s state machine, so every store agrees by construction. The caller loads the rollout
 * and its latest attempt (locked, where the database needs it), applies changes here, then persists
 * `rollout`, the changed attempts and the worker events.
 */
import {
  type Attempt,
  type AttemptStatus,
  assertAttemptTransition,
  assertRolloutTransition,
  attemptEndTime,
  IllegalTransitionError,
  isQueuingLike,
  isTerminalAttemptStatus,
  isTerminalRolloutStatus,
  newAttemptId,
  nextWatchdogDeadline,
  type Rollout,
  type RolloutStatus,
  rolloutEndTime,
  rolloutStatusAfterAttempt,
  settleSuccess,
  statusesAfterActivity,
  supersededMetadata,
  type WorkerStatus,
  watchdogVerdict,
  workerStatusForAttempt,
} from "@agl/core";

/** A worker change caused by an attempt change (see workerStatusForAttempt). */
export interface WorkerEvent {
  workerId: string;
  status: WorkerStatus;
  /** Null when current_rollout_id/current_attempt_id are cleared. */
  current: { rolloutId: string; attemptId: string } | null;
  /** Set last_dequeue_time = now as well (a claim or an empty dequeue). */
  dequeued: boolean;
}

export class RolloutMutation {
  /** Attempts created by this mutation (to INSERT), in order. */
  readonly created: Attempt[] = [];
  /** Existing attempts changed by this mutation (to UPDATE), by attempt_id. */
  readonly changed = new Map<string, Attempt>();
  readonly workerEvents: WorkerEvent[] = [];
  /** The rollout must be (re)appended to the queue unless it is already in it. */
  enqueue = false;
  /** The rollout reached a terminal status (wake waiters). */
  terminal = false;

  private readonly initial: { status: string; end_time: number | null; attemptCount: number };

  constructor(
    readonly rollout: Rollout,
    public latest: Attempt | null,
    public attemptCount: number,
    readonly now: number,
  ) {
    this.initial = { status: rollout.status, end_time: rollout.end_time, attemptCount };
  }

  /**
   * Whether the rollout row must be written: its status, end_time, attempt count or deadline changed,
   * or it must join the queue while not in it (`queued` = it has a queue position now).
   */
  needsRolloutWrite(previousDeadline: number | null, queued: boolean): boolean {
    const r = this.rollout;
    return (
      r.status !== this.initial.status ||
      r.end_time !== this.initial.end_time ||
      this.attemptCount !== this.initial.attemptCount ||
      this.deadline !== previousDeadline ||
      (this.enqueue && !queued)
    );
  }

  /** The watchdog deadline of the rollout after the changes (null = none). */
  get deadline(): number | null {
    return this.latest ? nextWatchdogDeadline(this.rollout, this.latest) : null;
  }

  isLatest(attempt: Attempt): boolean {
    return this.latest !== null && this.latest.attempt_id === attempt.attempt_id;
  }

  /** Move the rollout to `status` (already checked legal) with its end_time and queue side effects. */
  setRolloutStatus(status: RolloutStatus): void {
    const rollout = this.rollout;
    rollout.status = status;
    rollout.end_time = rolloutEndTime(status, rollout.end_time, this.now);
    if (isQueuingLike(status)) this.enqueue = true;
    if (isTerminalRolloutStatus(status)) this.terminal = true;
  }

  /** A new attempt (seq = count + 1, `preparing`); the rollout moves to `preparing`. */
  newAttempt(workerId: string | null): Attempt {
    assertRolloutTransition(this.rollout.rollout_id, this.rollout.status, "preparing");
    const attempt: Attempt = {
      rollout_id: this.rollout.rollout_id,
      attempt_id: newAttemptId(),
      sequence_id: this.attemptCount + 1,
      start_time: this.now,
      end_time: null,
      status: "preparing",
      worker_id: workerId,
      last_heartbeat_time: null,
      metadata: {},
    };
    this.attemptCount++;
    this.created.push(attempt);
    this.latest = attempt;
    this.setRolloutStatus("preparing");
    this.syncWorker(attempt);
    return attempt;
  }

  /** A worker claims the rollout off the queue: a new attempt, and the claim counts as its dequeue. */
  claim(workerId: string | null): Attempt {
    const attempt = this.newAttempt(workerId);
    const event = this.workerEvents[this.workerEvents.length - 1];
    if (workerId && event) event.dequeued = true;
    return attempt;
  }

  /** Apply the watchdog's verdict on the latest attempt at `now`, if any; true when one was applied. */
  applyWatchdogVerdict(): boolean {
    const verdict = this.latest ? watchdogVerdict(this.rollout, this.latest, this.now) : null;
    if (!verdict || !this.latest) return false;
    this.setAttemptStatus(this.latest, verdict);
    return true;
  }

  /** Move an attempt to `status` (checked); mirror it to the rollout when it is the latest; sync its worker. */
  setAttemptStatus(attempt: Attempt, status: AttemptStatus): void {
    assertAttemptTransition(attempt.attempt_id, attempt.status, status);
    const success = settleSuccess(this.rollout, attempt, status, this.isLatest(attempt));
    if (success.kind === "refused") {
      throw new IllegalTransitionError("attempt", attempt.attempt_id, attempt.status, status, success.reason);
    }
    attempt.status = status;
    attempt.end_time = attemptEndTime(status, attempt.end_time, this.now);
    this.touch(attempt);
    if (this.isLatest(attempt)) {
      const next = rolloutStatusAfterAttempt(this.rollout, attempt, status);
      if (next !== this.rollout.status) this.setRolloutStatus(next);
    } else if (success.kind === "late-win") {
      const latest = this.latest;
      // The newer attempt's worker may still be running it; its worker record is left to that worker.
      if (latest && !isTerminalAttemptStatus(latest.status)) {
        latest.status = "failed";
        latest.end_time = attemptEndTime("failed", latest.end_time, this.now);
        latest.metadata = supersededMetadata(latest.metadata, attempt.attempt_id);
        this.touch(latest);
      }
      this.setRolloutStatus("succeeded");
    }
    this.syncWorker(attempt);
  }

  /** A sign of life (span or heartbeat) at `heartbeat`: revive the attempt/rollout as the state machine says. */
  recordActivity(attempt: Attempt, heartbeat: number): void {
    attempt.last_heartbeat_time = heartbeat;
    this.touch(attempt);
    const next = statusesAfterActivity(this.rollout.status, attempt.status, this.isLatest(attempt));
    if (next.attempt !== attempt.status) {
      assertAttemptTransition(attempt.attempt_id, attempt.status, next.attempt);
      attempt.status = next.attempt;
      attempt.end_time = attemptEndTime(next.attempt, attempt.end_time, this.now);
      this.syncWorker(attempt);
    }
    if (next.rollout !== this.rollout.status) {
      assertRolloutTransition(this.rollout.rollout_id, this.rollout.status, next.rollout);
      this.setRolloutStatus(next.rollout);
    }
  }

  /** Record that `attempt` (already loaded) must be written back. */
  touch(attempt: Attempt): void {
    if (this.created.includes(attempt)) return;
    this.changed.set(attempt.attempt_id, attempt);
    if (this.latest && this.latest.attempt_id === attempt.attempt_id) this.latest = attempt;
  }

  /** Make the attempt's worker reflect the attempt (busy on it, idle or unknown). */
  syncWorker(attempt: Attempt): void {
    if (attempt.worker_id === null) return;
    const change = workerStatusForAttempt(attempt.status);
    this.workerEvents.push({
      workerId: attempt.worker_id,
      status: change.status,
      current: change.clearCurrent ? null : { rolloutId: attempt.rollout_id, attemptId: attempt.attempt_id },
      dequeued: false,
    });
  }
}

/**
 * Collapse a run of worker events into the fewest writes with the same outcome: consecutive events
 * for the same worker and status only differ in current_* (the last wins) and the dequeue flag (any).
 */
export function compactWorkerEvents(events: readonly WorkerEvent[]): WorkerEvent[] {
  const out: WorkerEvent[] = [];
  for (const event of events) {
    const last = out[out.length - 1];
    if (last && last.workerId === event.workerId && last.status === event.status) {
      out[out.length - 1] = { ...event, dequeued: last.dequeued || event.dequeued };
    } else {
      out.push({ ...event });
    }
  }
  return out;
}

/** The net effect of a worker's events within one transaction (all at the same `now`). */
export interface FoldedWorkerEvent extends WorkerEvent {
  /** The first event is busy/idle: the timestamp is set only if the worker was not already busy/idle. */
  busyFirst: boolean;
  idleFirst: boolean;
  /** A later event switches to busy/idle: the timestamp is set whatever the worker was before. */
  busyLater: boolean;
  idleLater: boolean;
}

/**
 * Fold the events of a transaction into one write per worker (sorted by worker id, so concurrent
 * transactions lock worker rows in the same order), equivalent to applying them one by one.
 */
export function foldWorkerEvents(events: readonly WorkerEvent[]): FoldedWorkerEvent[] {
  const byWorker = new Map<string, WorkerEvent[]>();
  for (const e of events) {
    let list = byWorker.get(e.workerId);
    if (!list) byWorker.set(e.workerId, (list = []));
    list.push(e);
  }
  const out: FoldedWorkerEvent[] = [];
  for (const [workerId, list] of byWorker) {
    const runs = compactWorkerEvents(list);
    const last = runs[runs.length - 1]!;
    const later = runs.slice(1).map((e) => e.status);
    out.push({
      workerId,
      status: last.status,
      current: last.current,
      dequeued: list.some((e) => e.dequeued),
      busyFirst: runs[0]!.status === "busy",
      idleFirst: runs[0]!.status === "idle",
      busyLater: later.includes("busy"),
      idleLater: later.includes("idle"),
    });
  }
  return out.sort((a, b) => (a.workerId < b.workerId ? -1 : a.workerId > b.workerId ? 1 : 0));
}
