import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { InvalidArgumentError } from "../errors.js";
import type { Logger } from "../logger.js";
import { sanitizeSpanInput } from "../store/span-sanitize.js";
import type { LightningStore } from "../store/store.js";
import { newSpanId, newTraceId } from "../types/ids.js";
import type { Span, SpanCoreFields, SpanInput } from "../types/span.js";
import { traceStorage } from "./context.js";
import { spanFromCoreFields, spanFromReadableStamped, stampResource } from "./core-fields.js";
import type { LightningTracer } from "./tracer.js";

type Pending =
  | { kind: "readable"; span: ReadableSpan }
  | { kind: "core"; core: SpanCoreFields }
  | { kind: "span"; span: SpanInput };

export interface RolloutTraceOptions {
  rolloutId: string;
  attemptId: string;
  /** Where spans go; null keeps them local only (e.g. tracing outside a runner). */
  store: LightningStore | null;
  tracerName: string;
  logger: Logger;
  /** The tracer emitters use for spans of this attempt (its processors see them). */
  tracer?: LightningTracer;
  /**
   * Waits between the rounds in which `flush()` resends spans the store has not acknowledged yet
   * (their sequence-id call or their write failed). Default {@link DEFAULT_SPAN_RETRY_DELAYS_MS}.
   */
  retryDelaysMs?: readonly number[];
}

/** ~16 s in all: long enough to ride out a store restart, short enough not to stall a worker. */
export const DEFAULT_SPAN_RETRY_DELAYS_MS: readonly number[] = [250, 500, 1000, 2000, 4000, 8000];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The spans of one attempt. Finished spans are queued and written in batches (one sequence-id call and
 * one addManySpans per batch) so a burst of spans costs two store round trips. Every span is also kept
 * locally; a failed write is logged, never thrown into the agent, and resent by `flush()`, which keeps
 * trying until the store has acknowledged every span or its retry delays run out. What is still not
 * acknowledged then is counted by `unacknowledgedCount` (the runner fails such an attempt). *
 * What an agent records never fails its attempt for its content: text no store can hold (U+0000, lone
 * surrogates) is sanitised before it is sent (span-sanitize.ts: U+FFFD, `agl.sanitized = true`), and a
 * span the store still refuses as invalid (a 4xx, which no retry can change) is dropped alone — the
 * rest of its batch is stored — and logged at warn with the reason; `refusedCount` counts them.
 */
export class RolloutTrace {
  readonly rolloutId: string;
  readonly attemptId: string;
  readonly tracer: LightningTracer | undefined;
  private readonly store: LightningStore | null;
  private readonly tracerName: string;
  private readonly logger: Logger;
  private readonly retryDelaysMs: readonly number[];
  private queue: Pending[] = [];
  /** Spans whose sequence-id call failed: not converted yet. */
  private retry: Pending[] = [];
  /** Converted spans whose write failed. */
  private unsent: Span[] = [];
  private readonly kept: Span[] = [];
  private refused = 0;
  private chain: Promise<void> = Promise.resolve();
  private scheduled = false;
  private localSeq = 0;
  private root: { traceId: string; spanId: string } | undefined;

  constructor(options: RolloutTraceOptions) {
    this.rolloutId = options.rolloutId;
    this.attemptId = options.attemptId;
    this.tracer = options.tracer;
    this.store = options.store;
    this.tracerName = options.tracerName;
    this.logger = options.logger;
    this.retryDelaysMs = options.retryDelaysMs ?? DEFAULT_SPAN_RETRY_DELAYS_MS;
  }

  /** Run `fn` with this attempt as the current trace context (spans made inside belong to it). */
  run<T>(fn: () => T): T {
    return traceStorage.run({ trace: this, parent: undefined }, fn);
  }

  /** Called by the span processor when a span started in this context ends. */
  acceptReadable(span: ReadableSpan): void {
    this.push({ kind: "readable", span });
  }

  /** Record spans given as core fields (a reward returned by the agent, an exception). */
  addCoreFields(core: SpanCoreFields): void {
    this.push({ kind: "core", core });
  }

  /** Record an already-shaped span; its rollout/attempt ids are replaced by this attempt's. */
  addSpan(span: SpanInput): void {
    this.push({ kind: "span", span });
  }

  /**
   * Wait until the store has acknowledged every span recorded so far. Writes still in flight are
   * awaited first, so a write that fails meanwhile is resent too; spans whose sequence-id call failed
   * get one now. Rounds repeat after each of `retryDelaysMs` while anything is unacknowledged; what
   * remains after the last is kept locally and counted by `unacknowledgedCount`.
   */
  async flush(): Promise<void> {
    for (let round = 0; ; round++) {
      await this.serialised(async () => {
        this.queue.unshift(...this.retry.splice(0));
        await this.resendUnsent();
        await this.drainOnce();
      });
      if (this.unacknowledgedCount === 0) return;
      const delay = this.retryDelaysMs[round];
      if (delay === undefined) break;
      await sleep(delay);
    }
    this.logger.warn(
      `${this.unacknowledgedCount} span(s) of ${this.rolloutId}/${this.attemptId} were not stored; kept locally`,
    );
  }

  /** Spans the store refused as invalid (dropped, logged at warn; never retried). */
  get refusedCount(): number {
    return this.refused;
  }

  /** Spans recorded but not (yet) acknowledged by the store; always 0 without a store. */
  get unacknowledgedCount(): number {
    if (!this.store) return 0;
    return this.queue.length + this.retry.length + this.unsent.length;
  }

  /**
   * The attempt's enclosing span (the runner's `agent.rollout`): spans recorded from core fields (a
   * returned reward, an exception) join its trace as its children instead of starting traces of their own.
   */
  setRoot(root: { traceId: string; spanId: string }): void {
    this.root = root;
  }

  private underRoot(span: Span): Span {
    if (!this.root) return span;
    const { traceId, spanId } = this.root;
    return {
      ...span,
      trace_id: traceId,
      parent_id: spanId,
      context: { ...span.context!, trace_id: traceId },
      parent: { trace_id: traceId, span_id: spanId, is_remote: false, trace_state: {} },
    };
  }

  /** Every span of this attempt converted so far (stored or not), in sequence order. */
  spans(): Span[] {
    return [...this.kept].sort((a, b) => a.sequence_id - b.sequence_id);
  }

  /** Spans that could not be written to the store (those that never got a sequence id are not spans yet). */
  unsentSpans(): Span[] {
    return [...this.unsent];
  }

  private push(item: Pending): void {
    this.queue.push(item);
    if (this.scheduled) return;
    this.scheduled = true;
    // setImmediate groups every span ended in the same tick of I/O into one write.
    setImmediate(() => {
      this.scheduled = false;
      void this.drain();
    });
  }

  private drain(): Promise<void> {
    return this.serialised(() => this.drainOnce());
  }

  /** Writes are serialised so sequence ids follow the order spans ended in. */
  private serialised(step: () => Promise<void>): Promise<void> {
    this.chain = this.chain
      .then(step)
      .catch((error) => this.logger.error(`span submission for ${this.rolloutId} failed`, error));
    return this.chain;
  }

  private async resendUnsent(): Promise<void> {
    if (!this.store || this.unsent.length === 0) return;
    const resend = this.unsent.splice(0);
    // Resending is safe: stores ignore a span whose (rollout, attempt, span id) they already hold.
    const failed = await this.write(resend);
    if (failed) {
      this.unsent.unshift(...failed.spans);
      this.logger.warn(
        `could not store ${failed.spans.length} span(s) of ${this.rolloutId}/${this.attemptId}; will retry`,
        failed.error,
      );
    }
  }

  /**
   * Store `spans`; returns the ones to retry (and why) when the store could not take them. A batch
   * refused as invalid is written span by span, so only the invalid spans are dropped.
   */
  private async write(spans: Span[]): Promise<{ spans: Span[]; error: unknown } | null> {
    const store = this.store!;
    try {
      await store.addManySpans(spans);
      return null;
    } catch (error) {
      if (!InvalidArgumentError.isInstance(error)) return { spans, error };
      if (spans.length === 1) {
        this.refuse(spans[0]!, error);
        return null;
      }
    }
    const retry: Span[] = [];
    let lastError: unknown;
    for (const span of spans) {
      try {
        await store.addManySpans([span]);
      } catch (error) {
        if (InvalidArgumentError.isInstance(error)) this.refuse(span, error);
        else {
          retry.push(span);
          lastError = error;
        }
      }
    }
    return retry.length > 0 ? { spans: retry, error: lastError } : null;
  }

  private refuse(span: Span, error: InvalidArgumentError): void {
    this.refused += 1;
    this.logger.warn(
      `the store refused span ${span.sequence_id} (${span.name}) of ${this.rolloutId}/${this.attemptId}; dropped: ${error.message}`,
    );
  }

  private async drainOnce(): Promise<void> {
    while (this.queue.length > 0) {
      const items = this.queue.splice(0);
      let seqs: number[];
      try {
        seqs = this.store
          ? await this.store.getManySpanSequenceIds(
              items.map(() => [this.rolloutId, this.attemptId] as const),
            )
          : items.map(() => ++this.localSeq);
      } catch (error) {
        this.retry.push(...items);
        this.logger.warn(
          `could not allocate span sequence ids for ${this.rolloutId}; will retry at flush`,
          error,
        );
        return;
      }
      const spans = items.map((item, i) => this.convert(item, seqs[i]!));
      this.kept.push(...spans);
      if (!this.store) continue;
      const failed = await this.write(spans);
      if (failed) {
        this.unsent.push(...failed.spans);
        this.logger.warn(
          `could not store ${failed.spans.length} span(s) of ${this.rolloutId}/${this.attemptId}; will retry at flush`,
          failed.error,
        );
      }
    }
  }

  /** The stored form of a recorded span: this attempt's ids, defaults filled, text sanitised. */
  private convert(item: Pending, sequenceId: number): Span {
    return sanitizeSpanInput(this.shape(item, sequenceId)) as Span;
  }

  private shape(item: Pending, sequenceId: number): Span {
    const ids = {
      rolloutId: this.rolloutId,
      attemptId: this.attemptId,
      sequenceId,
      tracerName: this.tracerName,
    };
    if (item.kind === "readable") return spanFromReadableStamped(item.span, ids);
    if (item.kind === "core") return this.underRoot(spanFromCoreFields(item.core, ids));
    const s = item.span;
    const traceId = s.trace_id || newTraceId();
    const spanId = s.span_id || newSpanId();
    return stampResource(
      {
        ...(s as Span),
        rollout_id: this.rolloutId,
        attempt_id: this.attemptId,
        sequence_id: sequenceId,
        trace_id: traceId,
        span_id: spanId,
        parent_id: s.parent_id ?? null,
        status: { status_code: s.status?.status_code ?? "UNSET", description: s.status?.description ?? null },
        attributes: { ...(s.attributes ?? {}) },
        events: (s.events ?? []) as Span["events"],
        links: (s.links ?? []) as Span["links"],
        start_time: s.start_time ?? null,
        end_time: s.end_time ?? null,
        context: (s.context as Span["context"]) ?? {
          trace_id: traceId,
          span_id: spanId,
          is_remote: false,
          trace_state: {},
        },
        parent: (s.parent as Span["parent"]) ?? null,
        resource: {
          attributes: { ...(s.resource?.attributes ?? {}) },
          schema_url: s.resource?.schema_url ?? "",
        },
      },
      ids,
    );
  }
}
