/**
 * The in-memory store's tables and every state change, all synchronous so that no other call can
 * interleave (JavaScript runs each method to completion; no lock needed). Status logic comes only
 * from the shared pure functions in ../state-machine.ts. Callers validate and copy; this module
 * trusts its inputs and hands out its own objects.
 */
import { IllegalTransitionError, NotFoundError } from "../../errors.js";
import { newAttemptId, newResourcesId, newRolloutId } from "../../types/ids.js";
import { capSequenceId } from "../../types/input-rules.js";
import type { Worker } from "../../types/misc.js";
import type { NamedResources, ResourcesUpdate } from "../../types/resources.js";
import type {
  Attempt,
  AttemptStatus,
  Rollout,
  RolloutConfig,
  RolloutMode,
  RolloutStatus,
} from "../../types/rollout.js";
import type { Span } from "../../types/span.js";
import {
  assertAttemptTransition,
  assertRolloutTransition,
  attemptEndTime,
  isQueuingLike,
  isTerminalAttemptStatus,
  isTerminalRolloutStatus,
  nextWatchdogDeadline,
  rolloutEndTime,
  rolloutStatusAfterAttempt,
  settleSuccess,
  statusesAfterActivity,
  supersededMetadata,
  watchdogVerdict,
  workerStatusForAttempt,
} from "../state-machine.js";
import { DeadlineScheduler } from "./deadlines.js";
import type { SpanEviction } from "./eviction.js";
import { RolloutQueue } from "./fifo.js";
import { CompletionWaiters } from "./waiters.js";

export interface NewRollout {
  input: unknown;
  mode: RolloutMode | null;
  resources_id: string | null;
  config: RolloutConfig;
  metadata: Record<string, unknown>;
}

const spanKey = (rid: string, aid: string, sid: string): string => `${rid}\u0000${aid}\u0000${sid}`;

export class MemoryEngine {
  readonly rollouts = new Map<string, Rollout>();
  /** Attempts of each rollout in sequence order; the last one is the latest. */
  readonly attempts = new Map<string, Attempt[]>();
  readonly spans = new Map<string, Span[]>();
  readonly resources = new Map<string, ResourcesUpdate>();
  readonly workers = new Map<string, Worker>();
  readonly queue = new RolloutQueue();
  readonly waiters: CompletionWaiters;
  private readonly deadlines: DeadlineScheduler;
  private readonly spanKeys = new Set<string>();
  private readonly sequence = new Map<string, number>();
  private latestResourcesId: string | null = null;
  totalAttempts = 0;
  totalSpans = 0;

  constructor(
    private readonly now: () => number,
    activeWatchdog: boolean,
    /** Opt-in span eviction (memory/eviction.ts); null keeps every span. */
    readonly eviction: SpanEviction | null = null,
  ) {
    this.deadlines = new DeadlineScheduler((ids, at) => this.expire(ids, at), activeWatchdog, now);
    // While someone awaits a rollout, a pending watchdog deadline may be what finishes it: keep the
    // process alive for it then, and let it exit otherwise.
    this.waiters = new CompletionWaiters((count) => this.deadlines.setKeepAlive(count > 0));
  }

  // --- lookups

  rollout(rid: string): Rollout {
    const rollout = this.rollouts.get(rid);
    if (!rollout) throw new NotFoundError("rollout", rid, `Rollout ${rid} not found`);
    return rollout;
  }

  latestAttempt(rid: string): Attempt | null {
    const list = this.attempts.get(rid);
    return list && list.length > 0 ? list[list.length - 1]! : null;
  }

  attempt(rid: string, aid: string | "latest"): Attempt {
    this.rollout(rid);
    const found =
      aid === "latest" ? this.latestAttempt(rid) : this.attempts.get(rid)?.find((a) => a.attempt_id === aid);
    if (!found) throw new NotFoundError("attempt", aid, `Attempt ${aid} not found for rollout ${rid}`);
    return found;
  }

  latestResources(): ResourcesUpdate | null {
    return this.latestResourcesId === null ? null : (this.resources.get(this.latestResourcesId) ?? null);
  }

  /** Of `ids`, the existing rollouts that are not terminal (unknown ids are never waited for). */
  unfinished(ids: readonly string[]): string[] {
    return ids.filter((id) => {
      const r = this.rollouts.get(id);
      return r !== undefined && !isTerminalRolloutStatus(r.status);
    });
  }

  /** Of `ids`, the rollouts that are terminal, in the order given. */
  finished(ids: readonly string[]): Rollout[] {
    const out: Rollout[] = [];
    for (const id of ids) {
      const r = this.rollouts.get(id);
      if (r && isTerminalRolloutStatus(r.status)) out.push(r);
    }
    return out;
  }

  // --- the watchdog

  /** Apply verdicts that are due but whose timer has not fired yet, so every call sees a consistent state. */
  tick(): void {
    const now = this.now();
    const ids = this.deadlines.takeDue(now);
    if (ids.length > 0) this.expire(ids, now);
    this.deadlines.arm();
  }

  private expire(ids: string[], now: number): void {
    for (const rid of ids) {
      const rollout = this.rollouts.get(rid);
      const attempt = this.latestAttempt(rid);
      if (!rollout || !attempt) continue;
      const verdict = watchdogVerdict(rollout, attempt, now);
      if (verdict) this.setAttemptStatus(rollout, attempt, verdict, now);
      else this.refreshDeadline(rid);
    }
  }

  private refreshDeadline(rid: string): void {
    const rollout = this.rollouts.get(rid);
    const attempt = this.latestAttempt(rid);
    this.deadlines.set(rid, rollout && attempt ? nextWatchdogDeadline(rollout, attempt) : null);
  }

  // --- rollouts

  createRollout(req: NewRollout, status: RolloutStatus, now: number): Rollout {
    const rollout: Rollout = {
      rollout_id: newRolloutId(),
      input: req.input,
      start_time: now,
      end_time: null,
      mode: req.mode,
      resources_id: req.resources_id ?? this.latestResourcesId,
      status,
      config: req.config,
      metadata: req.metadata,
    };
    this.rollouts.set(rollout.rollout_id, rollout);
    this.attempts.set(rollout.rollout_id, []);
    if (isQueuingLike(status)) this.queue.push(rollout.rollout_id);
    return rollout;
  }

  /** Move a rollout to `status` (already checked legal) with its side effects: end_time, queue, waiters, watchdog. */
  setRolloutStatus(rollout: Rollout, status: RolloutStatus, now: number): void {
    rollout.status = status;
    rollout.end_time = rolloutEndTime(status, rollout.end_time, now);
    if (isQueuingLike(status)) this.queue.push(rollout.rollout_id);
    if (isTerminalRolloutStatus(status)) {
      this.waiters.notify(rollout.rollout_id);
      this.eviction?.noteTerminal();
    }
    this.refreshDeadline(rollout.rollout_id);
  }

  /** Start a new attempt (seq = count + 1, `preparing`) and move the rollout to `preparing`. */
  newAttempt(rollout: Rollout, workerId: string | null, now: number): Attempt {
    assertRolloutTransition(rollout.rollout_id, rollout.status, "preparing");
    const list = this.attempts.get(rollout.rollout_id)!;
    const attempt: Attempt = {
      rollout_id: rollout.rollout_id,
      attempt_id: newAttemptId(),
      sequence_id: list.length + 1,
      start_time: now,
      end_time: null,
      status: "preparing",
      worker_id: workerId,
      last_heartbeat_time: null,
      metadata: {},
    };
    list.push(attempt);
    this.totalAttempts++;
    this.setRolloutStatus(rollout, "preparing", now);
    this.syncWorker(attempt, now);
    return attempt;
  }

  /** Claim the next queued rollout, skipping stale entries (rollouts no longer queuing-like). */
  dequeue(workerId: string | null, now: number): { rollout: Rollout; attempt: Attempt } | null {
    for (let rid = this.queue.shift(); rid !== undefined; rid = this.queue.shift()) {
      const rollout = this.rollouts.get(rid);
      if (!rollout || !isQueuingLike(rollout.status)) continue;
      const attempt = this.newAttempt(rollout, workerId, now);
      if (workerId !== null) this.worker(workerId).last_dequeue_time = now;
      return { rollout, attempt };
    }
    return null;
  }

  /** An empty dequeue by a worker marks it idle. */
  markWorkerIdle(workerId: string, now: number): void {
    const worker = this.worker(workerId);
    worker.last_dequeue_time = now;
    this.setWorkerStatus(worker, "idle", true, now);
  }

  // --- attempts

  /** Move an attempt to `status` (checked), mirror it to the rollout if it is the latest, sync its worker. */
  setAttemptStatus(rollout: Rollout, attempt: Attempt, status: AttemptStatus, now: number): void {
    assertAttemptTransition(attempt.attempt_id, attempt.status, status);
    const latest = this.latestAttempt(rollout.rollout_id)!;
    const success = settleSuccess(rollout, attempt, status, latest === attempt);
    if (success.kind === "refused") {
      throw new IllegalTransitionError("attempt", attempt.attempt_id, attempt.status, status, success.reason);
    }
    attempt.status = status;
    attempt.end_time = attemptEndTime(status, attempt.end_time, now);
    if (latest === attempt) {
      const next = rolloutStatusAfterAttempt(rollout, attempt, status);
      if (next !== rollout.status) this.setRolloutStatus(rollout, next, now);
    } else if (success.kind === "late-win") {
      // The newer attempt's worker may still be running it; its worker record is left to that worker.
      if (!isTerminalAttemptStatus(latest.status)) {
        latest.status = "failed";
        latest.end_time = attemptEndTime("failed", latest.end_time, now);
        latest.metadata = supersededMetadata(latest.metadata, attempt.attempt_id);
      }
      this.setRolloutStatus(rollout, "succeeded", now);
    }
    this.syncWorker(attempt, now);
    this.refreshDeadline(rollout.rollout_id);
  }

  /** A sign of life (span or heartbeat): record it and revive the attempt/rollout as the state machine says. */
  recordActivity(rollout: Rollout, attempt: Attempt, heartbeat: number, now: number): void {
    attempt.last_heartbeat_time = heartbeat;
    const isLatest = this.latestAttempt(rollout.rollout_id) === attempt;
    const next = statusesAfterActivity(rollout.status, attempt.status, isLatest);
    if (next.attempt !== attempt.status) {
      assertAttemptTransition(attempt.attempt_id, attempt.status, next.attempt);
      attempt.status = next.attempt;
      attempt.end_time = attemptEndTime(next.attempt, attempt.end_time, now);
      this.syncWorker(attempt, now);
    }
    if (next.rollout !== rollout.status) {
      assertRolloutTransition(rollout.rollout_id, rollout.status, next.rollout);
      this.setRolloutStatus(rollout, next.rollout, now);
    }
    this.refreshDeadline(rollout.rollout_id);
  }

  // --- spans

  /** The per-rollout counter: max(counter, seq). */
  bumpSequence(rid: string, seq: number): void {
    if (seq > (this.sequence.get(rid) ?? 0)) this.sequence.set(rid, seq);
  }

  /** The next id, saturating at MAX_SPAN_SEQUENCE_ID (the counter never exceeds what inputs accept). */
  nextSequence(rid: string): number {
    const next = capSequenceId((this.sequence.get(rid) ?? 0) + 1);
    this.sequence.set(rid, next);
    return next;
  }

  /**
   * Store a span (its rollout and attempt must exist); null for a duplicate (rid, aid, span_id) or
   * for a span of an attempt whose spans were evicted (it still counts as a sign of life).
   */
  addSpan(span: Span, now: number): Span | null {
    const rollout = this.rollout(span.rollout_id);
    const attempt = this.attempt(span.rollout_id, span.attempt_id);
    if (this.eviction?.isEvicted(span.rollout_id, span.attempt_id)) {
      // Keeping it would make a partial trajectory look whole; reads of this attempt fail instead.
      this.eviction.discardedLateSpans++;
      this.bumpSequence(span.rollout_id, span.sequence_id);
      this.recordActivity(rollout, attempt, now, now);
      return null;
    }
    const key = spanKey(span.rollout_id, span.attempt_id, span.span_id);
    if (this.spanKeys.has(key)) return null;
    this.spanKeys.add(key);
    let list = this.spans.get(span.rollout_id);
    if (!list) this.spans.set(span.rollout_id, (list = []));
    list.push(span);
    this.totalSpans++;
    this.eviction?.noteStored(span, rollout.status);
    this.bumpSequence(span.rollout_id, span.sequence_id);
    this.recordActivity(rollout, attempt, now, now);
    return span;
  }

  /** After span writes: evict the oldest terminal rollouts' spans if a limit is exceeded. */
  enforceSpanLimits(): void {
    this.eviction?.enforce(this, this.totalSpans);
  }

  /** Forget every stored span of `rid` (eviction). */
  dropSpans(rid: string): void {
    const list = this.spans.get(rid);
    if (!list) return;
    for (const s of list) this.spanKeys.delete(spanKey(s.rollout_id, s.attempt_id, s.span_id));
    this.spans.delete(rid);
    this.totalSpans -= list.length;
  }

  // --- resources

  putResources(id: string | null, resources: NamedResources, now: number): ResourcesUpdate {
    const existing = id === null ? undefined : this.resources.get(id);
    const update: ResourcesUpdate = existing
      ? { ...existing, resources, update_time: now, version: existing.version + 1 }
      : { resources_id: id ?? newResourcesId(), resources, create_time: now, update_time: now, version: 1 };
    this.resources.set(update.resources_id, update);
    this.latestResourcesId = update.resources_id;
    return update;
  }

  // --- workers

  worker(workerId: string): Worker {
    let worker = this.workers.get(workerId);
    if (!worker) {
      worker = {
        worker_id: workerId,
        status: "unknown",
        heartbeat_stats: null,
        last_heartbeat_time: null,
        last_dequeue_time: null,
        last_busy_time: null,
        last_idle_time: null,
        current_rollout_id: null,
        current_attempt_id: null,
      };
      this.workers.set(workerId, worker);
    }
    return worker;
  }

  /** Mirror an attempt's status onto the worker running it (§1.1 worker sync). */
  syncWorker(attempt: Attempt, now: number): void {
    if (attempt.worker_id === null) return;
    const worker = this.worker(attempt.worker_id);
    const change = workerStatusForAttempt(attempt.status);
    this.setWorkerStatus(worker, change.status, change.clearCurrent, now);
    if (!change.clearCurrent) {
      worker.current_rollout_id = attempt.rollout_id;
      worker.current_attempt_id = attempt.attempt_id;
    }
  }

  private setWorkerStatus(
    worker: Worker,
    status: Worker["status"],
    clearCurrent: boolean,
    now: number,
  ): void {
    if (status === "busy" && worker.status !== "busy") worker.last_busy_time = now;
    if (status === "idle" && worker.status !== "idle") worker.last_idle_time = now;
    worker.status = status;
    if (clearCurrent) {
      worker.current_rollout_id = null;
      worker.current_attempt_id = null;
    }
  }

  // --- lifecycle

  stop(error: unknown): void {
    this.deadlines.stop();
    this.waiters.rejectAll(error);
  }

  get pendingDeadlines(): number {
    return this.deadlines.size;
  }
}
