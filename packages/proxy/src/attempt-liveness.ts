import {
  type AttemptStatus,
  InvalidArgumentError,
  type LightningStore,
  NotFoundError,
  type RolloutStatus,
} from "@agl/core";
import type { ProxyLogger } from "./options.js";

/** The store methods used to tell whether an attempt still runs. */
export type AttemptStatusLookup = Pick<LightningStore, "queryAttempts"> &
  Partial<Pick<LightningStore, "getRolloutById">>;

/** Statuses after which an attempt never runs again: cached for good. */
const FINISHED: ReadonlySet<AttemptStatus> = new Set(["succeeded", "failed", "timeout"]);
/** Attempt statuses a token works in. */
const RUNNING: ReadonlySet<AttemptStatus> = new Set(["preparing", "running"]);
/** Rollout statuses that end every attempt's token (a cancelled rollout's attempt may still say running). */
const ENDED: ReadonlySet<RolloutStatus> = new Set(["cancelled", "failed", "succeeded"]);
const MAX_CACHED = 50_000;

interface RolloutState {
  rollout: RolloutStatus | null;
  attempts: Map<string, AttemptStatus>;
}

interface Read {
  startedAt: number;
  state: Promise<RolloutState | null>;
}

/**
 * Whether the attempt a scoped token names is still running, so a token stops working as soon as its
 * attempt is not (finished, `unresponsive`, or its rollout cancelled or ended): a leaked or replayed token
 * cannot add calls, or spans, to it. Every check reads the store afresh (no grace period), but cheaply:
 * one read per rollout serves every call that arrived before it started (concurrent calls share it), the
 * handler starts it before reading the request body, and a final status is cached for good. A store that
 * cannot be asked answers "running" (fail open, logged): the token's expiry still applies.
 */
export class AttemptLiveness {
  private readonly finished = new Map<string, AttemptStatus>();
  private readonly reads = new Map<string, Read>();

  constructor(
    private readonly store: AttemptStatusLookup,
    private readonly log: ProxyLogger,
  ) {}

  static for(store: object, log: ProxyLogger): AttemptLiveness | null {
    return typeof (store as Partial<AttemptStatusLookup>).queryAttempts === "function"
      ? new AttemptLiveness(store as AttemptStatusLookup, log)
      : null;
  }

  /**
   * Why the attempt's token no longer works (its status, or `rollout <status>`), or null while it runs (or
   * is unknown to the store: the unknown-attempt check answers that). `arrivedAt` (performance time
   * origin + now, ms): the status read must have started after it.
   */
  async blockedStatus(rolloutId: string, attemptId: string, arrivedAt: number): Promise<string | null> {
    const key = `${rolloutId}\0${attemptId}`;
    const done = this.finished.get(key);
    if (done !== undefined) return done;
    const state = await this.read(rolloutId, attemptId, arrivedAt);
    if (state === null) return null;
    const status = state.attempts.get(attemptId);
    if (status === undefined) return null;
    if (FINISHED.has(status)) {
      if (this.finished.size >= MAX_CACHED) this.finished.clear();
      this.finished.set(key, status);
      return status;
    }
    if (!RUNNING.has(status)) return status;
    if (state.rollout !== null && ENDED.has(state.rollout)) return `rollout ${state.rollout}`;
    return null;
  }

  private read(rolloutId: string, attemptId: string, arrivedAt: number): Promise<RolloutState | null> {
    const current = this.reads.get(rolloutId);
    if (current && current.startedAt >= arrivedAt) return current.state;
    const read: Read = {
      startedAt: performance.timeOrigin + performance.now(),
      state: Promise.resolve(null),
    };
    read.state = this.fetch(rolloutId, attemptId).finally(() => {
      if (this.reads.get(rolloutId) === read) this.reads.delete(rolloutId);
    });
    this.reads.set(rolloutId, read);
    return read.state;
  }

  /** The rollout's status and its attempts': one query when the attempt is the latest (the usual case). */
  private async fetch(rolloutId: string, attemptId: string): Promise<RolloutState | null> {
    try {
      let rollout: RolloutStatus | null = null;
      if (this.store.getRolloutById) {
        const r = await this.store.getRolloutById(rolloutId);
        if (r === null) return { rollout: null, attempts: new Map() };
        rollout = r.status;
        const latest = "attempt" in r ? r.attempt : null;
        if (latest?.attempt_id === attemptId)
          return { rollout, attempts: new Map([[attemptId, latest.status]]) };
      }
      const page = await this.store.queryAttempts(rolloutId, { limit: -1 });
      return { rollout, attempts: new Map(page.items.map((a) => [a.attempt_id, a.status])) };
    } catch (error) {
      // an id the store cannot even hold names no attempt (the unknown-attempt check answers it)
      if (NotFoundError.isInstance(error) || InvalidArgumentError.isInstance(error))
        return { rollout: null, attempts: new Map() };
      this.log.error(`checking the attempts of ${rolloutId} failed: ${(error as Error).message}`);
      return null;
    }
  }
}
