import { InvalidArgumentError, type LightningStore, NotFoundError } from "@agl/core";
import type { ProxyLogger } from "./options.js";

/** The store method used to tell whether an attempt exists (optional on a SpanSink). */
export type AttemptLookup = Pick<LightningStore, "queryAttempts">;

const MAX_KNOWN = 50_000;

/**
 * Whether (rollout, attempt) exists in the store, so a call naming an unknown attempt can be answered 404
 * (Agent Lightning v1.0) instead of being forwarded and then losing its span to the store's rejection.
 *
 * The hot path must stay a Map lookup: existing attempts are cached (attempts are never deleted while a
 * rollout runs, so a positive answer stays true), concurrent lookups of one rollout share one store query,
 * and negative answers are cached only briefly because the trainer may create the attempt a moment later.
 */
export class AttemptDirectory {
  private readonly known = new Map<string, true>();
  private readonly unknownUntil = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<Set<string> | null>>();

  constructor(
    private readonly store: AttemptLookup,
    private readonly log: ProxyLogger,
    private readonly negativeTtlMs = 1_000,
  ) {}

  /** A store the directory can use, or null when the sink cannot look attempts up. */
  static for(store: object, log: ProxyLogger): AttemptDirectory | null {
    return typeof (store as Partial<AttemptLookup>).queryAttempts === "function"
      ? new AttemptDirectory(store as AttemptLookup, log)
      : null;
  }

  /** Synchronous answer when cached: true/false, undefined when the store must be asked. */
  cached(rolloutId: string, attemptId: string): boolean | undefined {
    const key = `${rolloutId}\0${attemptId}`;
    if (this.known.has(key)) return true;
    const until = this.unknownUntil.get(key);
    if (until === undefined) return undefined;
    if (until > performance.now()) return false;
    this.unknownUntil.delete(key);
    return undefined;
  }

  /** Whether the attempt exists. A store failure answers true (fail open: the span write will report it). */
  async exists(rolloutId: string, attemptId: string): Promise<boolean> {
    const hit = this.cached(rolloutId, attemptId);
    if (hit !== undefined) return hit;
    let pending = this.inflight.get(rolloutId);
    if (!pending) {
      pending = this.fetch(rolloutId).finally(() => this.inflight.delete(rolloutId));
      this.inflight.set(rolloutId, pending);
    }
    const attempts = await pending;
    if (attempts === null) return true;
    const key = `${rolloutId}\0${attemptId}`;
    if (attempts.has(attemptId)) return true;
    if (this.unknownUntil.size >= MAX_KNOWN) this.unknownUntil.clear();
    this.unknownUntil.set(key, performance.now() + this.negativeTtlMs);
    return false;
  }

  private async fetch(rolloutId: string): Promise<Set<string> | null> {
    let ids: Set<string>;
    try {
      const page = await this.store.queryAttempts(rolloutId, { limit: -1 });
      ids = new Set(page.items.map((a) => a.attempt_id));
    } catch (error) {
      // an id the store cannot even hold names no attempt; anything else is the store's trouble
      if (NotFoundError.isInstance(error) || InvalidArgumentError.isInstance(error)) return new Set();
      this.log.error(`looking up attempts of ${rolloutId} failed: ${(error as Error).message}`);
      return null;
    }
    for (const id of ids) {
      if (this.known.size >= MAX_KNOWN) {
        // insertion order: drop the oldest entry (a finished rollout's, most likely)
        const oldest = this.known.keys().next().value;
        if (oldest !== undefined) this.known.delete(oldest);
      }
      this.known.set(`${rolloutId}\0${id}`, true);
    }
    return ids;
  }
}
