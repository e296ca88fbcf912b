/**
 * Opt-in span eviction for InMemoryLightningStore (Agent Lightning v0.3 §2: above a memory threshold
 * the spans of the oldest rollouts are dropped until usage is under a safe threshold).
 *
 * The reference measures process memory; here the limits are on what the store itself holds (a span
 * count and/or the spans' estimated JSON size), so that eviction is deterministic and testable: heap
 * usage only falls after a garbage collection, so it cannot tell when enough was dropped.
 *
 * Policy: after a span write leaves the store above a limit, the spans of the oldest (by creation)
 * *terminal* rollouts are dropped, a whole rollout at a time, until both figures are at or under
 * `safeRatio` × their limit. Spans of rollouts that are not terminal are never dropped, even when
 * nothing else is left: they are the training data of rollouts still running, and a trainer reading
 * them later would silently get a truncated trajectory. The store then stays above the limit until
 * rollouts finish (bounded by the spans of the rollouts running at once) and retries on the next write.
 */
import { z } from "zod";
import type { Rollout } from "../../types/rollout.js";
import type { Span } from "../../types/span.js";
import { isTerminalRolloutStatus } from "../state-machine.js";

export const SpanEvictionOptionsSchema = z
  .object({
    /** Most spans the store holds before it evicts. */
    maxSpans: z.number().int().positive().optional(),
    /** Most span data (estimated as JSON length, in bytes) the store holds before it evicts. */
    maxSpanBytes: z.number().int().positive().optional(),
    /** Eviction stops once usage is at or under safeRatio × each limit. Default 0.8, as in the reference. */
    safeRatio: z.number().gt(0).max(1).optional(),
  })
  .strict()
  .refine((o) => o.maxSpans !== undefined || o.maxSpanBytes !== undefined, {
    message: "set maxSpans and/or maxSpanBytes",
    path: ["maxSpans"],
  });
export type SpanEvictionOptions = z.input<typeof SpanEvictionOptionsSchema>;

/** What eviction needs of the engine's tables. */
export interface EvictionHost {
  /** In creation order (a Map keeps insertion order), so the first ones are the oldest. */
  readonly rollouts: ReadonlyMap<string, Rollout>;
  readonly spans: ReadonlyMap<string, readonly Span[]>;
  /** Remove every stored span of `rid` (lists, dedup keys, counts). */
  dropSpans(rid: string): void;
}

/** Estimated size of a span: its JSON length (a copy's cost, paid only when maxSpanBytes is set). */
function estimateBytes(span: Span): number {
  try {
    return JSON.stringify(span)?.length ?? 0;
  } catch {
    // Not JSON-serialisable (a cycle): count a typical span rather than fail a write.
    return 1024;
  }
}

export class SpanEviction {
  private readonly maxSpans: number;
  private readonly maxBytes: number;
  private readonly safeSpans: number;
  private readonly safeBytes: number;
  private bytes = 0;
  private readonly bytesByRollout = new Map<string, number>();
  /** Attempts whose spans were dropped, by rollout: reads of them fail, later spans are discarded. */
  private readonly evicted = new Map<string, Set<string>>();
  /**
   * The last pass found no terminal rollout with spans left; skip passes until one may exist again,
   * so that a store held over its limit by running rollouts does not rescan on every write.
   */
  private exhausted = false;
  evictedSpans = 0;
  evictedRollouts = 0;
  discardedLateSpans = 0;

  constructor(options: z.output<typeof SpanEvictionOptionsSchema>) {
    const ratio = options.safeRatio ?? 0.8;
    this.maxSpans = options.maxSpans ?? Number.POSITIVE_INFINITY;
    this.maxBytes = options.maxSpanBytes ?? Number.POSITIVE_INFINITY;
    this.safeSpans = Math.floor(this.maxSpans * ratio);
    this.safeBytes = Math.floor(this.maxBytes * ratio);
  }

  private get tracksBytes(): boolean {
    return Number.isFinite(this.maxBytes);
  }

  isEvicted(rid: string, aid: string): boolean {
    return this.evicted.get(rid)?.has(aid) ?? false;
  }

  /** True when some attempt of `rid` lost its spans. */
  hasEvicted(rid: string): boolean {
    return this.evicted.has(rid);
  }

  /** A span was stored for a rollout in `status`. */
  noteStored(span: Span, status: Rollout["status"]): void {
    if (this.tracksBytes) {
      const b = estimateBytes(span);
      this.bytes += b;
      this.bytesByRollout.set(span.rollout_id, (this.bytesByRollout.get(span.rollout_id) ?? 0) + b);
    }
    if (isTerminalRolloutStatus(status)) this.exhausted = false;
  }

  /** A rollout became terminal: its spans may now be evicted. */
  noteTerminal(): void {
    this.exhausted = false;
  }

  /** Evict if `spanCount` or the byte estimate is above its limit (see the policy at the top). */
  enforce(host: EvictionHost, spanCount: number): void {
    if ((spanCount <= this.maxSpans && this.bytes <= this.maxBytes) || this.exhausted) return;
    let count = spanCount;
    for (const rollout of host.rollouts.values()) {
      if (count <= this.safeSpans && this.bytes <= this.safeBytes) return;
      if (!isTerminalRolloutStatus(rollout.status)) continue;
      const rid = rollout.rollout_id;
      const list = host.spans.get(rid);
      if (!list || list.length === 0) continue;
      let attempts = this.evicted.get(rid);
      if (!attempts) this.evicted.set(rid, (attempts = new Set()));
      for (const span of list) attempts.add(span.attempt_id);
      count -= list.length;
      this.evictedSpans += list.length;
      this.evictedRollouts++;
      this.bytes -= this.bytesByRollout.get(rid) ?? 0;
      this.bytesByRollout.delete(rid);
      host.dropSpans(rid);
    }
    this.exhausted = !(count <= this.safeSpans && this.bytes <= this.safeBytes);
  }

  statistics(): Record<string, number> {
    return {
      evicted_spans: this.evictedSpans,
      evicted_rollouts: this.evictedRollouts,
      discarded_late_spans: this.discardedLateSpans,
      ...(this.tracksBytes ? { span_bytes: this.bytes } : {}),
    };
  }
}
