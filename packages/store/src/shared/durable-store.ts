/**
 * The LightningStore surface both durable stores share: argument validation (same schemas and field
 * names as the in-memory store), the read side (delegated to the backend's queries), waiting for
 * rollouts, the watchdog and waiter-hub plumbing, and close. The SQLite and PostgreSQL subclasses
 * supply the state-changing calls, each in its own kind of transaction.
 */
import {
  AbortedError,
  type Attempt,
  type AttemptedRollout,
  type AttemptQuery,
  capSequenceId,
  type EnqueueRolloutRequest,
  type NamedResources,
  NamedResourcesSchema,
  nowSeconds,
  type PaginatedResult,
  parseOrThrow,
  parseSpanInput,
  parseSpanInputs,
  type ResourcesQuery,
  type ResourcesUpdate,
  type Rollout,
  type RolloutQuery,
  type Span,
  type SpanInput,
  type SpanQuery,
  type StoreCapabilities,
  StoreClosedError,
  type WaitForRolloutsOptions,
  type Worker,
  type WorkerQuery,
} from "@agl/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { z } from "zod";
import type { RolloutMutation } from "./rollout-mutation.js";
import {
  DEFAULT_WAIT_POLL_INTERVAL_MS,
  DEFAULT_WATCHDOG_MAX_SLEEP_MS,
  DequeueOptionsSchema,
  type DurableStoreOptionsSchema,
  IdSchema,
  ReadableSpanSchema,
  SeqPairsSchema,
  SequenceIdSchema,
  WaitSchema,
  WorkerUpdateSchema,
} from "./schemas.js";
import { handOutSequences, sequenceCounts } from "./sequences.js";
import { acquireHub, type CompletionHub, releaseHub, waitForTerminal } from "./waiters.js";
import { Watchdog } from "./watchdog.js";

type MaybePromise<T> = T | Promise<T>;

/** Re-read interval of a waiter while notifications are live: a safety net only, never the wake-up path. */
const NOTIFIED_SAFETY_POLL_MS = 30_000;

/** The read queries every durable backend answers (SQLite synchronously, PostgreSQL asynchronously). */
export interface DurableReads {
  rollouts(query: RolloutQuery): MaybePromise<PaginatedResult<Rollout | AttemptedRollout>>;
  rolloutById(id: string): MaybePromise<Rollout | AttemptedRollout | null>;
  latestAttempt(id: string): MaybePromise<Attempt | null>;
  terminalRollouts(ids: readonly string[]): MaybePromise<Map<string, Rollout>>;
  existingRolloutIds(ids: readonly string[]): MaybePromise<Set<string>>;
  attempts(rid: string, query: AttemptQuery): MaybePromise<PaginatedResult<Attempt>>;
  spans(rid: string, query: SpanQuery): MaybePromise<PaginatedResult<Span>>;
  resources(query: ResourcesQuery): MaybePromise<PaginatedResult<ResourcesUpdate>>;
  resourcesById(id: string): MaybePromise<ResourcesUpdate | null>;
  latestResources(): MaybePromise<ResourcesUpdate | null>;
  workers(query: WorkerQuery): MaybePromise<PaginatedResult<Worker>>;
  workerById(id: string): MaybePromise<Worker | null>;
}

/** What a transaction changed that this instance must announce once it commits. */
export interface Effects {
  /** Rollouts that reached a terminal status (wake waiters). */
  terminal: string[];
  /** Watchdog deadlines written (arm the timer). */
  deadlines: Array<number | null>;
}

export const newEffects = (): Effects => ({ terminal: [], deadlines: [] });

export function recordEffects(effects: Effects, m: RolloutMutation): void {
  if (m.terminal) effects.terminal.push(m.rollout.rollout_id);
  effects.deadlines.push(m.deadline);
}

export abstract class DurableStoreBase {
  readonly capabilities: StoreCapabilities = {
    thread_safe: true,
    async_safe: true,
    zero_copy: false,
    otlp_traces: false,
  };
  protected readonly watchdog: Watchdog;
  protected readonly hub: CompletionHub;
  protected readonly startedAt = nowSeconds();
  protected closed = false;
  /** Attempts this instance's watchdog timed out or marked unresponsive (exactly-once checks sum these). */
  protected verdicts = 0;
  /** waitForRollouts calls of this instance now waiting (`pending_waiters` in statistics). */
  protected waiting = 0;
  protected abstract readonly queries: DurableReads;
  private readonly pollMs: number;

  protected constructor(
    private readonly hubKey: string,
    label: string,
    opts: z.output<typeof DurableStoreOptionsSchema>,
  ) {
    this.hub = acquireHub(hubKey);
    this.pollMs = opts.waitPollIntervalMs ?? DEFAULT_WAIT_POLL_INTERVAL_MS;
    this.watchdog = new Watchdog(async (now) => this.expire(now), {
      active: opts.watchdog ?? true,
      maxSleepMs: opts.watchdogMaxSleepMs ?? DEFAULT_WATCHDOG_MAX_SLEEP_MS,
      onError: (error) => console.error(`[agl-store] ${label} watchdog pass failed:`, error),
    });
  }

  /**
   * True while the backend delivers other processes' terminal rollouts as notifications (PostgreSQL
   * LISTEN): waiters then rely on them instead of polling. A backend whose notifications stop must
   * wake every waiter (`hub.notifyAll()`) so none sleeps through a missed change.
   */
  protected notificationsLive(): boolean {
    return false;
  }

  /** Every public call starts here: refuse after close, then apply due watchdog verdicts. */
  protected abstract enter(): unknown;
  /** One watchdog pass at `now`; returns the earliest deadline still pending. */
  protected abstract expire(now: number): MaybePromise<number | null>;
  /** Store validated spans in one transaction (a bad target stores nothing). */
  protected abstract writeSpans(spans: Span[]): MaybePromise<Span[]>;
  /** Convert and store one OpenTelemetry span of an attempt that must exist. */
  protected abstract writeOtelSpan(
    rid: string,
    aid: string,
    span: ReadableSpan,
    sequenceId: number | undefined,
  ): MaybePromise<Span | null>;
  /** Reserve `count` consecutive sequence ids per rollout; returns the first of each block. */
  protected abstract reserveSequences(counts: Map<string, number>): MaybePromise<Map<string, number>>;
  protected abstract saveResources(
    id: string | null,
    resources: NamedResources,
  ): MaybePromise<ResourcesUpdate>;
  protected abstract saveHeartbeat(
    workerId: string,
    stats: Record<string, unknown> | null | undefined,
  ): MaybePromise<Worker>;
  abstract enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]>;
  abstract dequeueManyRollouts(options: {
    limit: number;
    workerId?: string | null;
  }): Promise<AttemptedRollout[]>;

  /** Announce a committed transaction's effects to this instance's watchdog and waiters. */
  protected publish(effects: Effects): void {
    for (const d of effects.deadlines) this.watchdog.note(d);
    if (effects.terminal.length > 0) this.hub.notify(effects.terminal);
  }

  // --- rollouts and the queue

  async enqueueRollout(request: EnqueueRolloutRequest): Promise<Rollout> {
    return (await this.enqueueManyRollouts([request]))[0]!;
  }

  async dequeueRollout(options: { workerId?: string | null } = {}): Promise<AttemptedRollout | null> {
    const { workerId } = parseOrThrow(DequeueOptionsSchema, options, "options");
    return (await this.dequeueManyRollouts({ limit: 1, workerId }))[0] ?? null;
  }

  async queryRollouts(query: RolloutQuery = {}): Promise<PaginatedResult<Rollout | AttemptedRollout>> {
    await this.enter();
    return this.queries.rollouts(query);
  }

  async getRolloutById(rolloutId: string): Promise<Rollout | AttemptedRollout | null> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    await this.enter();
    return this.queries.rolloutById(rid);
  }

  async waitForRollouts(rolloutIds: string[], options: WaitForRolloutsOptions = {}): Promise<Rollout[]> {
    const {
      rolloutIds: ids,
      timeoutSeconds,
      signal,
    } = parseOrThrow(WaitSchema, { rolloutIds, ...options }, "");
    // Before anything is read, like fetch: an aborted caller gets no partial answer.
    AbortedError.throwIfAborted(signal, "waitForRollouts");
    await this.enter();
    const unique = [...new Set(ids)];
    const done = await this.queries.terminalRollouts(unique);
    const existing = await this.queries.existingRolloutIds(unique);
    const pending = unique.filter((id) => existing.has(id) && !done.has(id));
    const timeout = timeoutSeconds === undefined ? null : timeoutSeconds;
    let final = done;
    if (pending.length > 0 && (timeout === null || timeout > 0)) {
      this.waiting++;
      try {
        await waitForTerminal(
          this.hub,
          pending,
          timeout,
          // With live database notifications a waiter need not poll: only a rare safety re-read.
          () => (this.notificationsLive() ? NOTIFIED_SAFETY_POLL_MS : this.pollMs),
          async (left) => {
            await this.enter();
            return new Set((await this.queries.terminalRollouts(left)).keys());
          },
          () => this.closed,
          signal,
        );
      } finally {
        this.waiting--;
      }
      if (this.closed) throw new StoreClosedError();
      final = await this.queries.terminalRollouts(unique);
    }
    return unique.filter((id) => final.has(id)).map((id) => final.get(id)!);
  }

  // --- attempts

  async queryAttempts(rolloutId: string, query: AttemptQuery = {}): Promise<PaginatedResult<Attempt>> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    await this.enter();
    return this.queries.attempts(rid, query);
  }

  async getLatestAttempt(rolloutId: string): Promise<Attempt | null> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    await this.enter();
    return this.queries.latestAttempt(rid);
  }

  // --- resources

  async addResources(resources: NamedResources): Promise<ResourcesUpdate> {
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    await this.enter();
    return this.saveResources(null, named);
  }

  async updateResources(resourcesId: string, resources: NamedResources): Promise<ResourcesUpdate> {
    const id = parseOrThrow(IdSchema, resourcesId, "resources_id");
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    await this.enter();
    return this.saveResources(id, named);
  }

  async getResourcesById(resourcesId: string): Promise<ResourcesUpdate | null> {
    const id = parseOrThrow(IdSchema, resourcesId, "resources_id");
    await this.enter();
    return this.queries.resourcesById(id);
  }

  async getLatestResources(): Promise<ResourcesUpdate | null> {
    await this.enter();
    return this.queries.latestResources();
  }

  async queryResources(query: ResourcesQuery = {}): Promise<PaginatedResult<ResourcesUpdate>> {
    await this.enter();
    return this.queries.resources(query);
  }

  // --- spans

  async addSpan(span: SpanInput): Promise<Span | null> {
    const parsed = parseSpanInput(span, "span");
    await this.enter();
    return (await this.writeSpans([parsed]))[0] ?? null;
  }

  async addManySpans(spans: SpanInput[]): Promise<Span[]> {
    const parsed = parseSpanInputs(spans, "spans");
    await this.enter();
    if (parsed.length === 0) return [];
    return this.writeSpans(parsed);
  }

  async addOtelSpan(
    rolloutId: string,
    attemptId: string,
    span: ReadableSpan,
    sequenceId?: number,
  ): Promise<Span | null> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const aid = parseOrThrow(IdSchema, attemptId, "attempt_id");
    const readable = parseOrThrow(ReadableSpanSchema, span, "span");
    const seq = parseOrThrow(SequenceIdSchema, sequenceId, "sequence_id");
    await this.enter();
    return this.writeOtelSpan(rid, aid, readable, seq);
  }

  async getNextSpanSequenceId(rolloutId: string, attemptId: string): Promise<number> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    parseOrThrow(IdSchema, attemptId, "attempt_id");
    await this.enter();
    return capSequenceId((await this.reserveSequences(new Map([[rid, 1]]))).get(rid)!);
  }

  async getManySpanSequenceIds(pairs: ReadonlyArray<readonly [string, string]>): Promise<number[]> {
    const list = parseOrThrow(SeqPairsSchema, pairs, "pairs");
    await this.enter();
    if (list.length === 0) return [];
    return handOutSequences(list, await this.reserveSequences(sequenceCounts(list)));
  }

  async querySpans(rolloutId: string, query: SpanQuery = {}): Promise<PaginatedResult<Span>> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    await this.enter();
    return this.queries.spans(rid, query);
  }

  // --- workers

  async queryWorkers(query: WorkerQuery = {}): Promise<PaginatedResult<Worker>> {
    await this.enter();
    return this.queries.workers(query);
  }

  async getWorkerById(workerId: string): Promise<Worker | null> {
    const wid = parseOrThrow(IdSchema, workerId, "worker_id");
    await this.enter();
    return this.queries.workerById(wid);
  }

  async updateWorker(
    workerId: string,
    update: { heartbeat_stats?: Record<string, unknown> | null } = {},
  ): Promise<Worker> {
    const wid = parseOrThrow(IdSchema, workerId, "worker_id");
    const u = parseOrThrow(WorkerUpdateSchema, update, "update");
    await this.enter();
    return this.saveHeartbeat(wid, u.heartbeat_stats);
  }

  /** Stop the watchdog and release waiters; false when already closed (the subclass then does nothing). */
  protected shutDown(): boolean {
    if (this.closed) return false;
    this.closed = true;
    this.watchdog.stop();
    this.hub.notifyAll();
    releaseHub(this.hubKey);
    return true;
  }
}
