import type { SpanInput } from "@agl/core";
import type { ProxyLogger, SpanSink } from "./options.js";

const MAX_BATCH = 256;

/**
 * Batches the store traffic of many concurrent calls: sequence ids requested in the same tick go out as one
 * `getManySpanSequenceIds`, spans finished in the same tick as one `addManySpans` (per-call validation and
 * copying dominate a store's cost, and batching roughly halves it). Order is preserved: ids are handed out
 * in request-arrival order, so a rollout's calls stay numbered as they came in.
 */
export class SpanWriter {
  private seqQueue: Array<{ rolloutId: string; attemptId: string; resolve(v: number | null): void }> = [];
  private spanQueue: Array<{ span: SpanInput; resolve(error: string | null): void }> = [];
  private seqScheduled = false;
  private spanScheduled = false;

  constructor(
    private readonly store: SpanSink,
    private readonly log: ProxyLogger,
  ) {}

  /** The next sequence id of the rollout; null (logged) if the store fails. */
  nextSequenceId(rolloutId: string, attemptId: string): Promise<number | null> {
    return new Promise((resolve) => {
      this.seqQueue.push({ rolloutId, attemptId, resolve });
      if (!this.seqScheduled) {
        this.seqScheduled = true;
        setImmediate(() => void this.flushSequenceIds());
      }
    });
  }

  /** Store the span; resolves with null when the store has it, else the store's error. Never rejects. */
  write(span: SpanInput): Promise<string | null> {
    return new Promise((resolve) => {
      this.spanQueue.push({ span, resolve });
      if (this.spanQueue.length >= MAX_BATCH) void this.flushSpans();
      else if (!this.spanScheduled) {
        this.spanScheduled = true;
        setImmediate(() => void this.flushSpans());
      }
    });
  }

  private async flushSequenceIds(): Promise<void> {
    this.seqScheduled = false;
    const batch = this.seqQueue;
    this.seqQueue = [];
    if (batch.length === 0) return;
    if (batch.length > 1 && typeof this.store.getManySpanSequenceIds === "function") {
      try {
        const ids = await this.store.getManySpanSequenceIds(
          batch.map((b) => [b.rolloutId, b.attemptId] as const),
        );
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(ids[i] ?? null);
        return;
      } catch (error) {
        this.log.error(`batched sequence ids failed, retrying one by one: ${(error as Error).message}`);
      }
    }
    for (const b of batch) {
      try {
        b.resolve(await this.store.getNextSpanSequenceId(b.rolloutId, b.attemptId));
      } catch (error) {
        this.log.error(`sequence id for ${b.rolloutId}/${b.attemptId} failed: ${(error as Error).message}`);
        b.resolve(null);
      }
    }
  }

  private async flushSpans(): Promise<void> {
    this.spanScheduled = false;
    const batch = this.spanQueue;
    this.spanQueue = [];
    if (batch.length === 0) return;
    if (batch.length > 1 && typeof this.store.addManySpans === "function") {
      try {
        await this.store.addManySpans(batch.map((b) => b.span));
        for (const b of batch) b.resolve(null);
        return;
      } catch {
        // a store may reject a whole batch for one bad span (unknown attempt): store the rest one by one
      }
    }
    await Promise.all(
      batch.map(async (b) => {
        try {
          await this.store.addSpan(b.span);
          b.resolve(null);
        } catch (error) {
          // the caller logs and counts it (it knows the call), so it is reported once
          b.resolve((error as Error).message);
        }
      }),
    );
  }
}
