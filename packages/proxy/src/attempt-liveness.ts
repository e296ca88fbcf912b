import type { AttemptStatus } from "@agl/core";
import type { AttemptLookup } from "./attempt-directory.js";
import type { ProxyLogger } from "./options.js";

/** Statuses after which an attempt never runs again: its scoped token stops working. */
const FINISHED: ReadonlySet<AttemptStatus> = new Set(["succeeded", "failed", "timeout"]);
const MAX_CACHED = 50_000;

/**
 * Whether the attempt a scoped token names is still running, so a token stops working once its attempt
 * finished (a leaked or replayed token cannot add calls, or spans, to a finished attempt). Finished is
 * final and cached for good; a running answer is re-checked after `recheckMs`, so the hot path is a Map
 * lookup and a store query per attempt at most once per interval (concurrent checks share it). A store
 * that cannot be asked answers "running" (fail open, logged): the expiry of the token still applies.
 */
export class AttemptLiveness {
  private readonly finished = new Map<string, AttemptStatus>();
  private readonly runningUntil = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<Map<string, AttemptStatus> | null>>();

  constructor(
    private readonly store: AttemptLookup,
    private readonly log: ProxyLogger,
    private readonly recheckMs = 1_000,
  ) {}

  static for(store: object, log: ProxyLogger): AttemptLiveness | null {
    return typeof (store as Partial<AttemptLookup>).queryAttempts === "function"
      ? new AttemptLiveness(store as AttemptLookup, log)
      : null;
  }

  /** The finished status of the attempt, or null while it may still run (or is unknown to the store). */
  async finishedStatus(rolloutId: string, attemptId: string): Promise<AttemptStatus | null> {
    const key = `${rolloutId}\0${attemptId}`;
    const done = this.finished.get(key);
    if (done !== undefined) return done;
    const until = this.runningUntil.get(key);
    if (until !== undefined && until > performance.now()) return null;
    let pending = this.inflight.get(rolloutId);
    if (!pending) {
      pending = this.fetch(rolloutId).finally(() => this.inflight.delete(rolloutId));
      this.inflight.set(rolloutId, pending);
    }
    const statuses = await pending;
    const status = statuses?.get(attemptId);
    if (status !== undefined && FINISHED.has(status)) {
      if (this.finished.size >= MAX_CACHED) this.finished.clear();
      this.finished.set(key, status);
      this.runningUntil.delete(key);
      return status;
    }
    if (this.runningUntil.size >= MAX_CACHED) this.runningUntil.clear();
    this.runningUntil.set(key, performance.now() + this.recheckMs);
    return null;
  }

  private async fetch(rolloutId: string): Promise<Map<string, AttemptStatus> | null> {
    try {
      const page = await this.store.queryAttempts(rolloutId, { limit: -1 });
      return new Map(page.items.map((a) => [a.attempt_id, a.status]));
    } catch (error) {
      this.log.error(`checking the attempts of ${rolloutId} failed: ${(error as Error).message}`);
      return null;
    }
  }
}
