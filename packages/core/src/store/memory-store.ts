/**
 * InMemoryLightningStore: the LightningStore of Agent Lightning v0.3 §1.1/§2 held in process memory.
 *
 * Improvements over the reference: an active watchdog (a single unref'd timer armed for the earliest
 * deadline, so attempts time out with no one calling the store), liveness from heartbeats as well as
 * spans, illegal transitions rejected with IllegalTransitionError, and waitForRollouts woken by
 * completion events. Inputs are validated (errors name the field) and copied in and out, so callers
 * can never reach the store's state through an object they passed or received.
 */
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { AbortedError, StoreClosedError } from "../errors.js";
import { nowSeconds } from "../types/ids.js";
import type { PaginatedResult, Worker } from "../types/misc.js";
import { type NamedResources, NamedResourcesSchema, type ResourcesUpdate } from "../types/resources.js";
import {
  type Attempt,
  type AttemptedRollout,
  type AttemptPatch,
  AttemptPatchSchema,
  EnqueueBatchSchema,
  type EnqueueRolloutRequest,
  EnqueueRolloutRequestSchema,
  type Rollout,
  RolloutConfigSchema,
  type RolloutPatch,
  RolloutPatchSchema,
} from "../types/rollout.js";
import type { Span, SpanInput } from "../types/span.js";
import { parseOrThrow } from "../types/validate.js";
import {
  copyData,
  DequeueManyOptionsSchema,
  SequencePairsSchema,
  StartRolloutRequestSchema,
  StoreIdSchema,
  WaitForRolloutsSchema,
  WorkerOptionSchema,
  WorkerUpdateSchema,
} from "./inputs.js";
import { type MemoryEngine as Engine, MemoryEngine, type NewRollout } from "./memory/engine.js";
import { SpanEviction, SpanEvictionOptionsSchema } from "./memory/eviction.js";
import { addManySpans, addOtelSpan, addSpan, querySpans } from "./memory/spans.js";
import { queryItems } from "./query.js";
import {
  normalizeAttemptQuery,
  normalizeResourcesQuery,
  normalizeRolloutQuery,
  normalizeWorkerQuery,
} from "./query-schemas.js";
import { assertRolloutTransition } from "./state-machine.js";
import type {
  AttemptQuery,
  LightningStore,
  ResourcesQuery,
  RolloutQuery,
  SpanQuery,
  StartRolloutRequest,
  StoreCapabilities,
  StoreStatistics,
  WaitForRolloutsOptions,
  WorkerQuery,
} from "./store.js";

export const InMemoryLightningStoreOptionsSchema = z
  .object({
    /**
     * Arm a background timer for watchdog deadlines (default true). When false, timeouts and
     * unresponsiveness are only detected at the start of store calls, like the reference.
     */
    watchdog: z.boolean().optional(),
    /** Opt-in: drop the spans of the oldest terminal rollouts above a limit (memory/eviction.ts). */
    spanEviction: SpanEvictionOptionsSchema.optional(),
  })
  .strict();
export type InMemoryLightningStoreOptions = z.input<typeof InMemoryLightningStoreOptionsSchema>;

export class InMemoryLightningStore implements LightningStore {
  readonly capabilities: StoreCapabilities = {
    thread_safe: false,
    async_safe: true,
    zero_copy: false,
    otlp_traces: false,
  };
  private readonly engine: Engine;
  private readonly startedAt = nowSeconds();
  private closed = false;

  constructor(options: InMemoryLightningStoreOptions = {}) {
    const opts = parseOrThrow(InMemoryLightningStoreOptionsSchema, options, "options");
    const eviction = opts.spanEviction ? new SpanEviction(opts.spanEviction) : null;
    this.engine = new MemoryEngine(nowSeconds, opts.watchdog ?? true, eviction);
  }

  /** Every public call starts here: refuse after close, then apply due watchdog verdicts. */
  private enter(): Engine {
    if (this.closed) throw new StoreClosedError();
    this.engine.tick();
    return this.engine;
  }

  private attempted(rollout: Rollout, attempt: Attempt | null): Rollout | AttemptedRollout {
    const out = copyData(rollout);
    return attempt ? { ...out, attempt: copyData(attempt) } : out;
  }

  private newRollout(request: z.output<typeof EnqueueRolloutRequestSchema>): NewRollout {
    return {
      input: copyData(request.input, "input"),
      mode: request.mode ?? null,
      resources_id: request.resources_id ?? null,
      config: request.config ? copyData(request.config) : RolloutConfigSchema.parse({}),
      metadata: copyData(request.metadata ?? {}, "metadata"),
    };
  }

  async statistics(): Promise<StoreStatistics> {
    const engine = this.enter();
    return {
      name: "InMemoryLightningStore",
      total_rollouts: engine.rollouts.size,
      total_attempts: engine.totalAttempts,
      total_spans: engine.totalSpans,
      total_resources: engine.resources.size,
      total_workers: engine.workers.size,
      uptime: nowSeconds() - this.startedAt,
      queue_length: engine.queue.length,
      pending_waiters: engine.waiters.count,
      watchdog_deadlines: engine.pendingDeadlines,
      ...engine.eviction?.statistics(),
    };
  }

  // --- rollouts and the queue

  async startRollout(request: StartRolloutRequest): Promise<AttemptedRollout> {
    const req = parseOrThrow(StartRolloutRequestSchema, request, "request");
    const engine = this.enter();
    const now = nowSeconds();
    const rollout = engine.createRollout(this.newRollout(req), "preparing", now);
    const attempt = engine.newAttempt(rollout, req.worker_id ?? null, now);
    return this.attempted(rollout, attempt) as AttemptedRollout;
  }

  async enqueueRollout(request: EnqueueRolloutRequest): Promise<Rollout> {
    const req = parseOrThrow(EnqueueRolloutRequestSchema, request, "request");
    const engine = this.enter();
    return copyData(engine.createRollout(this.newRollout(req), "queuing", nowSeconds()));
  }

  async enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]> {
    // Validate everything first so a bad item enqueues nothing.
    const reqs = parseOrThrow(EnqueueBatchSchema, requests, "requests");
    const prepared = reqs.map((r) => this.newRollout(r));
    const engine = this.enter();
    const now = nowSeconds();
    return prepared.map((r) => copyData(engine.createRollout(r, "queuing", now)));
  }

  async dequeueRollout(options: { workerId?: string | null } = {}): Promise<AttemptedRollout | null> {
    const { workerId } = parseOrThrow(WorkerOptionSchema, options, "options");
    const engine = this.enter();
    const now = nowSeconds();
    const claim = engine.dequeue(workerId ?? null, now);
    if (!claim) {
      if (workerId) engine.markWorkerIdle(workerId, now);
      return null;
    }
    return this.attempted(claim.rollout, claim.attempt) as AttemptedRollout;
  }

  async dequeueManyRollouts(options: {
    limit: number;
    workerId?: string | null;
  }): Promise<AttemptedRollout[]> {
    const { limit, workerId } = parseOrThrow(DequeueManyOptionsSchema, options, "options");
    const engine = this.enter();
    const now = nowSeconds();
    const out: AttemptedRollout[] = [];
    while (out.length < limit) {
      const claim = engine.dequeue(workerId ?? null, now);
      if (!claim) break;
      out.push(this.attempted(claim.rollout, claim.attempt) as AttemptedRollout);
    }
    if (out.length === 0 && limit > 0 && workerId) engine.markWorkerIdle(workerId, now);
    return out;
  }

  async startAttempt(
    rolloutId: string,
    options: { workerId?: string | null } = {},
  ): Promise<AttemptedRollout> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const { workerId } = parseOrThrow(WorkerOptionSchema, options, "options");
    const engine = this.enter();
    const rollout = engine.rollout(rid);
    const attempt = engine.newAttempt(rollout, workerId ?? null, nowSeconds());
    return this.attempted(rollout, attempt) as AttemptedRollout;
  }

  async queryRollouts(query: RolloutQuery = {}): Promise<PaginatedResult<Rollout | AttemptedRollout>> {
    const { filter, page } = normalizeRolloutQuery(query);
    const engine = this.enter();
    const result = queryItems(engine.rollouts.values(), filter, page);
    return {
      ...result,
      items: result.items.map((r) => this.attempted(r, engine.latestAttempt(r.rollout_id))),
    };
  }

  async getRolloutById(rolloutId: string): Promise<Rollout | AttemptedRollout | null> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const engine = this.enter();
    const rollout = engine.rollouts.get(rid);
    return rollout ? this.attempted(rollout, engine.latestAttempt(rid)) : null;
  }

  async updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const p = parseOrThrow(RolloutPatchSchema, patch, "patch");
    const engine = this.enter();
    const rollout = engine.rollout(rid);
    if (p.status !== undefined) assertRolloutTransition(rid, rollout.status, p.status);
    const now = nowSeconds();
    if ("input" in p) rollout.input = copyData(p.input, "input");
    if (p.mode !== undefined) rollout.mode = p.mode;
    if (p.resources_id !== undefined) rollout.resources_id = p.resources_id;
    if (p.config !== undefined) rollout.config = copyData(p.config);
    if (p.metadata !== undefined) rollout.metadata = copyData(p.metadata, "metadata");
    // Status last: a new config (timeouts) must be in place when the watchdog deadline is recomputed.
    engine.setRolloutStatus(rollout, p.status ?? rollout.status, now);
    return copyData(rollout);
  }

  async waitForRollouts(rolloutIds: string[], options: WaitForRolloutsOptions = {}): Promise<Rollout[]> {
    const {
      rolloutIds: ids,
      timeoutSeconds,
      signal,
    } = parseOrThrow(WaitForRolloutsSchema, { rolloutIds, ...options }, "");
    // Before anything is read, like fetch: an aborted caller gets no partial answer.
    AbortedError.throwIfAborted(signal, "waitForRollouts");
    const engine = this.enter();
    const unique = [...new Set(ids)];
    const pending = engine.unfinished(unique);
    const timeout = timeoutSeconds ?? null;
    if (pending.length > 0 && (timeout === null || timeout > 0))
      await engine.waiters.wait(pending, timeout, signal);
    if (this.closed) throw new StoreClosedError();
    return engine.finished(unique).map((r) => copyData(r));
  }

  // --- attempts

  async queryAttempts(rolloutId: string, query: AttemptQuery = {}): Promise<PaginatedResult<Attempt>> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const { filter, page } = normalizeAttemptQuery(query);
    const engine = this.enter();
    const result = queryItems(engine.attempts.get(rid) ?? [], filter, page);
    return { ...result, items: result.items.map((a) => copyData(a)) };
  }

  async getLatestAttempt(rolloutId: string): Promise<Attempt | null> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const engine = this.enter();
    const attempt = engine.latestAttempt(rid);
    return attempt ? copyData(attempt) : null;
  }

  async updateAttempt(
    rolloutId: string,
    attemptId: string | "latest",
    patch: AttemptPatch,
  ): Promise<Attempt> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    const aid = parseOrThrow(StoreIdSchema, attemptId, "attempt_id");
    const p = parseOrThrow(AttemptPatchSchema, patch, "patch");
    const engine = this.enter();
    const rollout = engine.rollout(rid);
    const attempt = engine.attempt(rid, aid);
    const now = nowSeconds();
    if (p.worker_id !== undefined) attempt.worker_id = p.worker_id;
    if (p.metadata !== undefined) attempt.metadata = copyData(p.metadata, "metadata");
    if (p.status !== undefined) {
      if (p.last_heartbeat_time !== undefined) attempt.last_heartbeat_time = p.last_heartbeat_time;
      engine.setAttemptStatus(rollout, attempt, p.status, now);
    } else if (p.last_heartbeat_time !== undefined) {
      // A bare heartbeat is a sign of life, exactly like a span.
      engine.recordActivity(rollout, attempt, p.last_heartbeat_time, now);
    } else if (p.worker_id !== undefined) {
      engine.syncWorker(attempt, now);
    }
    return copyData(attempt);
  }

  // --- resources

  async addResources(resources: NamedResources): Promise<ResourcesUpdate> {
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    return copyData(this.enter().putResources(null, copyData(named), nowSeconds()));
  }

  async updateResources(resourcesId: string, resources: NamedResources): Promise<ResourcesUpdate> {
    const id = parseOrThrow(StoreIdSchema, resourcesId, "resources_id");
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    return copyData(this.enter().putResources(id, copyData(named), nowSeconds()));
  }

  async getResourcesById(resourcesId: string): Promise<ResourcesUpdate | null> {
    const id = parseOrThrow(StoreIdSchema, resourcesId, "resources_id");
    const found = this.enter().resources.get(id);
    return found ? copyData(found) : null;
  }

  async getLatestResources(): Promise<ResourcesUpdate | null> {
    const latest = this.enter().latestResources();
    return latest ? copyData(latest) : null;
  }

  async queryResources(query: ResourcesQuery = {}): Promise<PaginatedResult<ResourcesUpdate>> {
    const { filter, page } = normalizeResourcesQuery(query);
    const result = queryItems(this.enter().resources.values(), filter, page);
    return { ...result, items: result.items.map((r) => copyData(r)) };
  }

  // --- spans (the logic lives in memory/spans.ts)

  async addSpan(span: SpanInput): Promise<Span | null> {
    return addSpan(() => this.enter(), span);
  }

  async addManySpans(spans: SpanInput[]): Promise<Span[]> {
    return addManySpans(() => this.enter(), spans);
  }

  async addOtelSpan(
    rolloutId: string,
    attemptId: string,
    span: ReadableSpan,
    sequenceId?: number,
  ): Promise<Span | null> {
    return addOtelSpan(() => this.enter(), rolloutId, attemptId, span, sequenceId);
  }

  async getNextSpanSequenceId(rolloutId: string, attemptId: string): Promise<number> {
    const rid = parseOrThrow(StoreIdSchema, rolloutId, "rollout_id");
    parseOrThrow(StoreIdSchema, attemptId, "attempt_id");
    return this.enter().nextSequence(rid);
  }

  async getManySpanSequenceIds(pairs: ReadonlyArray<readonly [string, string]>): Promise<number[]> {
    const list = parseOrThrow(SequencePairsSchema, pairs, "pairs");
    const engine = this.enter();
    return list.map(([rid]) => engine.nextSequence(rid));
  }

  async querySpans(rolloutId: string, query: SpanQuery = {}): Promise<PaginatedResult<Span>> {
    return querySpans(() => this.enter(), rolloutId, query);
  }

  // --- workers

  async queryWorkers(query: WorkerQuery = {}): Promise<PaginatedResult<Worker>> {
    const { filter, page } = normalizeWorkerQuery(query);
    const result = queryItems<Worker>(this.enter().workers.values(), filter, page);
    return { ...result, items: result.items.map((w) => copyData(w)) };
  }

  async getWorkerById(workerId: string): Promise<Worker | null> {
    const wid = parseOrThrow(StoreIdSchema, workerId, "worker_id");
    const worker = this.enter().workers.get(wid);
    return worker ? copyData(worker) : null;
  }

  async updateWorker(
    workerId: string,
    update: { heartbeat_stats?: Record<string, unknown> | null } = {},
  ): Promise<Worker> {
    const wid = parseOrThrow(StoreIdSchema, workerId, "worker_id");
    const u = parseOrThrow(WorkerUpdateSchema, update, "update");
    const worker = this.enter().worker(wid);
    worker.last_heartbeat_time = nowSeconds();
    if (u.heartbeat_stats !== undefined)
      worker.heartbeat_stats = copyData(u.heartbeat_stats, "heartbeat_stats");
    return copyData(worker);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.engine.stop(new StoreClosedError());
  }
}
