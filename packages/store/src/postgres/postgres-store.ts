/**
 * PostgresLightningStore: the LightningStore on PostgreSQL (a `pg` Pool), for many worker processes
 * sharing one database. Claims use `FOR UPDATE SKIP LOCKED`, every rollout change locks its row, span
 * inserts and state writes are batched with unnest, the per-rollout span sequence is an atomic upsert,
 * and terminal rollouts are announced with NOTIFY so waiters in other processes wake at once. Status
 * logic comes from @agl/core's state machine through RolloutMutation, as in every other store.
 */
import {
  type Attempt,
  type AttemptedRollout,
  type AttemptPatch,
  AttemptPatchSchema,
  type AttemptQuery,
  assertRolloutTransition,
  type EnqueueRolloutRequest,
  EnqueueRolloutRequestSchema,
  type LightningStore,
  type NamedResources,
  NamedResourcesSchema,
  nowSeconds,
  type PaginatedResult,
  parseOrThrow,
  type ResourcesQuery,
  type ResourcesUpdate,
  type Rollout,
  type RolloutPatch,
  RolloutPatchSchema,
  type RolloutQuery,
  type Span,
  type SpanInput,
  type SpanQuery,
  SpanSchema,
  type StartRolloutRequest,
  type StoreCapabilities,
  StoreClosedError,
  type StoreStatistics,
  spanFromReadable,
  type Worker,
  type WorkerQuery,
} from "@agl/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import pg from "pg";
import { z } from "zod";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import {
  DEFAULT_WAIT_POLL_INTERVAL_MS,
  DEFAULT_WATCHDOG_MAX_SLEEP_MS,
  DequeueManySchema,
  DequeueOptionsSchema,
  type DurableStoreOptions,
  DurableStoreOptionsSchema,
  IdSchema,
  ReadableSpanSchema,
  SeqPairsSchema,
  SequenceIdSchema,
  StartRolloutSchema,
  toJson,
  toJsonRequired,
  WaitSchema,
  WorkerUpdateSchema,
} from "../shared/schemas.js";
import { acquireHub, type CompletionHub, releaseHub, waitForTerminal } from "../shared/waiters.js";
import { Watchdog } from "../shared/watchdog.js";
import { migratePostgres } from "./migrations.js";
import {
  allocateSequences,
  key,
  loadAttempts,
  lockRollout,
  type PersistItem,
  persistMutations,
  type Queryable,
} from "./pg-db.js";
import {
  claimRollouts,
  expireDue,
  ingestSpans,
  insertRollouts,
  latestResourcesId,
  newRollout,
} from "./pg-ops.js";
import { PgQueries } from "./pg-queries.js";
import { withTransaction } from "./transaction.js";

export const PostgresStoreOptionsSchema = DurableStoreOptionsSchema.extend({
  /** Connections in the pool (default 10). */
  poolSize: z.number().int().positive().optional(),
  /** Schema holding the tables (created if missing; default "public"), so several stores can share a database. */
  schema: z
    .string()
    .regex(/^[a-z_][a-z0-9_]{0,62}$/, "must be a lower-case SQL identifier")
    .optional(),
  /** LISTEN for rollouts finished by other processes (default true); polling remains the fallback. */
  listen: z.boolean().optional(),
}).strict();
export type PostgresStoreOptions = DurableStoreOptions & z.input<typeof PostgresStoreOptionsSchema>;

export class PostgresLightningStore implements LightningStore {
  readonly capabilities: StoreCapabilities = {
    thread_safe: true,
    async_safe: true,
    zero_copy: false,
    otlp_traces: false,
  };
  private readonly queries: PgQueries;
  private readonly watchdog: Watchdog;
  private readonly hub: CompletionHub;
  private readonly hubKey: string;
  private readonly channel: string;
  private readonly startedAt = nowSeconds();
  private listener: pg.Client | null = null;
  private closed = false;
  /** Attempts this instance's watchdog timed out or marked unresponsive (exactly-once checks sum these). */
  private verdicts = 0;

  private constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    private readonly opts: z.output<typeof PostgresStoreOptionsSchema>,
    url: string,
  ) {
    this.queries = new PgQueries(pool);
    this.hubKey = `postgres:${url}#${schema}`;
    this.hub = acquireHub(this.hubKey);
    this.channel = `agl_terminal_${schema}`;
    this.watchdog = new Watchdog((now) => this.expire(now), {
      active: opts.watchdog ?? true,
      maxSleepMs: opts.watchdogMaxSleepMs ?? DEFAULT_WATCHDOG_MAX_SLEEP_MS,
      onError: (error) => console.error("[agl-store] postgres watchdog pass failed:", error),
    });
  }

  /** Connect, create the schema if needed, apply migrations and start the watchdog. */
  static async connect(url: string, options: PostgresStoreOptions = {}): Promise<PostgresLightningStore> {
    const opts = parseOrThrow(PostgresStoreOptionsSchema, options, "options");
    const schema = opts.schema ?? "public";
    const pool = new pg.Pool({
      connectionString: url,
      max: opts.poolSize ?? 10,
      options: `-c search_path=${schema}`,
    });
    // An idle client losing its connection must not crash the process; the next query reconnects.
    pool.on("error", (error) => console.error("[agl-store] idle postgres client error:", error.message));
    try {
      const client = await pool.connect();
      try {
        await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch((error) => {
          // Concurrent creators race on the catalog; the schema exists either way.
          if ((error as { code?: string }).code !== "23505") throw error;
        });
        await migratePostgres(client);
      } finally {
        client.release();
      }
    } catch (error) {
      await pool.end();
      throw error;
    }
    const store = new PostgresLightningStore(pool, schema, opts, url);
    if (opts.listen ?? true) await store.startListening(url);
    await store.watchdog.run(nowSeconds());
    return store;
  }

  private async startListening(url: string): Promise<void> {
    const client = new pg.Client({ connectionString: url });
    client.on("error", (error) => {
      if (!this.closed)
        console.error("[agl-store] postgres LISTEN connection lost; polling only:", error.message);
      this.listener = null;
    });
    client.on("notification", (msg) => {
      if (msg.payload) this.hub.notify(msg.payload.split(","));
    });
    await client.connect();
    await client.query(`LISTEN ${this.channel}`);
    this.listener = client;
  }

  /** Every public call starts here: refuse after close, then apply due watchdog verdicts. */
  private async enter(): Promise<void> {
    if (this.closed) throw new StoreClosedError();
    const now = nowSeconds();
    if (this.watchdog.isDue(now)) await this.watchdog.run(now);
  }

  /** Run `fn` in a transaction (retried on deadlock/serialization failure), then publish its effects. */
  private async write<T>(fn: (c: Queryable, effects: Effects) => Promise<T>): Promise<T> {
    await this.enter();
    let effects: Effects = { terminal: [], deadlines: [] };
    const result = await withTransaction(this.pool, async (c) => {
      effects = { terminal: [], deadlines: [] };
      return fn(c, effects);
    });
    for (const d of effects.deadlines) this.watchdog.note(d);
    if (effects.terminal.length > 0) this.hub.notify(effects.terminal);
    return result;
  }

  private async persist(
    c: Queryable,
    effects: Effects,
    items: PersistItem[],
    extraPops: string[] = [],
  ): Promise<void> {
    // NOTIFY (delivered at commit) wakes waiters in other processes.
    await persistMutations(c, items, { extraPops, notifyChannel: this.channel });
    for (const { m } of items) {
      if (m.terminal) effects.terminal.push(m.rollout.rollout_id);
      effects.deadlines.push(m.deadline);
    }
  }

  /** One watchdog pass: lock due rollouts (skipping ones another instance holds) and apply each verdict once. */
  private async expire(now: number): Promise<number | null> {
    if (this.closed) return null;
    const terminal: string[] = [];
    let applied = 0;
    await withTransaction(this.pool, async (c) => {
      terminal.length = 0;
      applied = 0;
      const pass = await expireDue(c, now);
      applied = pass.applied;
      terminal.push(...pass.terminal);
      const items = pass.items;
      if (items.length > 0) await persistMutations(c, items, { notifyChannel: this.channel });
    });
    this.verdicts += applied;
    if (terminal.length > 0) this.hub.notify(terminal);
    const { rows } = await this.pool.query<{ earliest: number | null }>(
      "SELECT MIN(deadline) AS earliest FROM rollouts WHERE deadline IS NOT NULL",
    );
    return rows[0]?.earliest ?? null;
  }

  async statistics(): Promise<StoreStatistics> {
    await this.enter();
    const { rows } = await this.pool.query(`SELECT
      (SELECT COUNT(*) FROM rollouts) AS rollouts, (SELECT COUNT(*) FROM attempts) AS attempts,
      (SELECT COUNT(*) FROM spans) AS spans, (SELECT COUNT(*) FROM resources) AS resources,
      (SELECT COUNT(*) FROM workers) AS workers,
      (SELECT COUNT(*) FROM rollouts WHERE queue_seq IS NOT NULL) AS queued,
      (SELECT COUNT(*) FROM rollouts WHERE deadline IS NOT NULL) AS deadlines`);
    const n = rows[0] as Record<string, string>;
    return {
      name: "PostgresLightningStore",
      total_rollouts: Number(n.rollouts),
      total_attempts: Number(n.attempts),
      total_spans: Number(n.spans),
      total_resources: Number(n.resources),
      total_workers: Number(n.workers),
      uptime: nowSeconds() - this.startedAt,
      queue_length: Number(n.queued),
      watchdog_verdicts: this.verdicts,
      watchdog_deadlines: Number(n.deadlines),
      schema: this.schema,
      pool_total: this.pool.totalCount,
      pool_idle: this.pool.idleCount,
    };
  }

  // --- rollouts and the queue

  async startRollout(request: StartRolloutRequest): Promise<AttemptedRollout> {
    const req = parseOrThrow(StartRolloutSchema, request, "request");
    return this.write(async (c, effects) => {
      const now = nowSeconds();
      const rollout = newRollout(req, "preparing", now, await latestResourcesId(c));
      await insertRollouts(c, [rollout], [null]);
      const m = new RolloutMutation(rollout, null, 0, now);
      const attempt = m.newAttempt(req.worker_id ?? null);
      await this.persist(c, effects, [{ m, prev: null }]);
      return { ...rollout, attempt };
    });
  }

  async enqueueRollout(request: EnqueueRolloutRequest): Promise<Rollout> {
    return (await this.enqueueManyRollouts([request]))[0]!;
  }

  async enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]> {
    const reqs = parseOrThrow(z.array(EnqueueRolloutRequestSchema), requests, "requests");
    await this.enter();
    if (reqs.length === 0) return [];
    // Queue positions and the latest resources in one round trip; one INSERT is atomic on its own.
    const { rows } = await this.pool.query<{ latest: string | null; seqs: string[] }>(
      `SELECT (SELECT resources_id FROM resources ORDER BY touch_seq DESC LIMIT 1) AS latest,
              ARRAY(SELECT nextval('rollout_queue_seq') FROM generate_series(1, $1)) AS seqs`,
      [reqs.length],
    );
    const { latest, seqs } = rows[0]!;
    const ordered = seqs
      .map(BigInt)
      .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
      .map(String);
    const now = nowSeconds();
    const rollouts = reqs.map((req) => newRollout(req, "queuing", now, latest));
    await insertRollouts(this.pool, rollouts, ordered);
    return rollouts;
  }

  async dequeueRollout(options: { workerId?: string | null } = {}): Promise<AttemptedRollout | null> {
    const { workerId } = parseOrThrow(DequeueOptionsSchema, options, "options");
    return (await this.dequeueManyRollouts({ limit: 1, workerId }))[0] ?? null;
  }

  async dequeueManyRollouts(options: {
    limit: number;
    workerId?: string | null;
  }): Promise<AttemptedRollout[]> {
    const { limit, workerId } = parseOrThrow(DequeueManySchema, options, "options");
    if (limit <= 0) {
      await this.enter();
      return [];
    }
    return this.write(async (c, effects) => {
      const now = nowSeconds();
      const { claimed: out, items, stale } = await claimRollouts(c, limit, workerId ?? null, now);
      if (items.length > 0 || stale.length > 0) await this.persist(c, effects, items, stale);
      if (out.length === 0 && workerId) {
        await persistMutations(c, [], {
          workerEvents: [{ workerId, status: "idle", current: null, dequeued: true }],
          now,
        });
      }
      return out;
    });
  }

  async startAttempt(
    rolloutId: string,
    options: { workerId?: string | null } = {},
  ): Promise<AttemptedRollout> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const { workerId } = parseOrThrow(DequeueOptionsSchema, options, "options");
    return this.write(async (c, effects) => {
      const loaded = await lockRollout(c, rid);
      const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      const attempt = m.newAttempt(workerId ?? null);
      await this.persist(c, effects, [{ m, prev: loaded.row }]);
      return { ...loaded.rollout, attempt };
    });
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

  async updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const p = parseOrThrow(RolloutPatchSchema, patch, "patch");
    return this.write(async (c, effects) => {
      const loaded = await lockRollout(c, rid);
      const rollout = loaded.rollout;
      if (p.status !== undefined) assertRolloutTransition(rid, rollout.status, p.status);
      if ("input" in p) rollout.input = p.input;
      if (p.mode !== undefined) rollout.mode = p.mode;
      if (p.resources_id !== undefined) rollout.resources_id = p.resources_id;
      if (p.config !== undefined) rollout.config = p.config;
      if (p.metadata !== undefined) rollout.metadata = p.metadata;
      await c.query(
        `UPDATE rollouts SET input = $2::jsonb, mode = $3, resources_id = $4, config = $5::jsonb, metadata = $6::jsonb
         WHERE rollout_id = $1`,
        [
          rid,
          toJson(rollout.input, "input"),
          rollout.mode,
          rollout.resources_id,
          toJsonRequired(rollout.config, "config"),
          toJsonRequired(rollout.metadata, "metadata"),
        ],
      );
      // Status last: the new config (timeouts) must be in place when the deadline is recomputed.
      const m = new RolloutMutation(rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      m.setRolloutStatus(p.status ?? rollout.status);
      await this.persist(c, effects, [{ m, prev: loaded.row }]);
      return rollout;
    });
  }

  async waitForRollouts(
    rolloutIds: string[],
    options: { timeoutSeconds?: number | null } = {},
  ): Promise<Rollout[]> {
    const { rolloutIds: ids, timeoutSeconds } = parseOrThrow(WaitSchema, { rolloutIds, ...options }, "");
    await this.enter();
    const unique = [...new Set(ids)];
    const done = await this.queries.terminalRollouts(unique);
    const existing = await this.queries.existingRolloutIds(unique);
    const pending = unique.filter((id) => existing.has(id) && !done.has(id));
    const timeout = timeoutSeconds === undefined ? null : timeoutSeconds;
    let final = done;
    if (pending.length > 0 && (timeout === null || timeout > 0)) {
      await waitForTerminal(
        this.hub,
        pending,
        timeout,
        this.opts.waitPollIntervalMs ?? DEFAULT_WAIT_POLL_INTERVAL_MS,
        async (left) => {
          await this.enter();
          return new Set((await this.queries.terminalRollouts(left)).keys());
        },
        () => this.closed,
      );
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

  async updateAttempt(
    rolloutId: string,
    attemptId: string | "latest",
    patch: AttemptPatch,
  ): Promise<Attempt> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const aid = parseOrThrow(IdSchema, attemptId, "attempt_id");
    const p = parseOrThrow(AttemptPatchSchema, patch, "patch");
    return this.write(async (c, effects) => {
      const loaded = await lockRollout(c, rid);
      const attempt = (await loadAttempts(c, [{ loaded, aid }])).get(key(rid, aid))!;
      const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      m.touch(attempt);
      if (p.worker_id !== undefined) attempt.worker_id = p.worker_id;
      if (p.metadata !== undefined) attempt.metadata = p.metadata;
      if (p.status !== undefined) {
        if (p.last_heartbeat_time !== undefined) attempt.last_heartbeat_time = p.last_heartbeat_time;
        m.setAttemptStatus(attempt, p.status);
      } else if (p.last_heartbeat_time !== undefined) {
        // A bare heartbeat is a sign of life, exactly like a span.
        m.recordActivity(attempt, p.last_heartbeat_time);
      } else if (p.worker_id !== undefined) {
        m.syncWorker(attempt);
      }
      await this.persist(c, effects, [{ m, prev: loaded.row }]);
      return attempt;
    });
  }

  // --- resources

  async addResources(resources: NamedResources): Promise<ResourcesUpdate> {
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    await this.enter();
    return this.queries.putResources(null, named, nowSeconds());
  }

  async updateResources(resourcesId: string, resources: NamedResources): Promise<ResourcesUpdate> {
    const id = parseOrThrow(IdSchema, resourcesId, "resources_id");
    const named = parseOrThrow(NamedResourcesSchema, resources, "resources");
    await this.enter();
    return this.queries.putResources(id, named, nowSeconds());
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
    const parsed = parseOrThrow(SpanSchema, span, "span");
    return (await this.write((c, effects) => this.storeSpans(c, effects, [parsed])))[0] ?? null;
  }

  async addManySpans(spans: SpanInput[]): Promise<Span[]> {
    const parsed = parseOrThrow(z.array(SpanSchema), spans, "spans");
    if (parsed.length === 0) {
      await this.enter();
      return [];
    }
    return this.write((c, effects) => this.storeSpans(c, effects, parsed));
  }

  /** Store spans and persist the activity they record. */
  private async storeSpans(c: Queryable, effects: Effects, spans: Span[]): Promise<Span[]> {
    const { stored, items } = await ingestSpans(c, spans, nowSeconds());
    if (items.length > 0) await this.persist(c, effects, items);
    return stored;
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
    return this.write(async (c, effects) => {
      await loadAttempts(c, [{ loaded: await lockRollout(c, rid), aid }]);
      const sequence = seq ?? (await allocateSequences(c, new Map([[rid, 1]]))).get(rid)!;
      const converted = spanFromReadable(readable, { rolloutId: rid, attemptId: aid, sequenceId: sequence });
      return (await this.storeSpans(c, effects, [parseOrThrow(SpanSchema, converted, "span")]))[0] ?? null;
    });
  }

  async getNextSpanSequenceId(rolloutId: string, attemptId: string): Promise<number> {
    const rid = parseOrThrow(z.string(), rolloutId, "rollout_id");
    parseOrThrow(z.string(), attemptId, "attempt_id");
    await this.enter();
    return (await allocateSequences(this.pool, new Map([[rid, 1]]))).get(rid)!;
  }

  async getManySpanSequenceIds(pairs: ReadonlyArray<readonly [string, string]>): Promise<number[]> {
    const list = parseOrThrow(SeqPairsSchema, pairs, "pairs");
    await this.enter();
    if (list.length === 0) return [];
    const counts = new Map<string, number>();
    for (const [rid] of list) counts.set(rid, (counts.get(rid) ?? 0) + 1);
    // One atomic statement reserves a block per rollout; hand the block out in request order.
    const last = await allocateSequences(this.pool, counts);
    const next = new Map([...counts].map(([rid, n]) => [rid, last.get(rid)! - n + 1]));
    return list.map(([rid]) => {
      const value = next.get(rid)!;
      next.set(rid, value + 1);
      return value;
    });
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
    return this.queries.heartbeatWorker(wid, u.heartbeat_stats, nowSeconds());
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.watchdog.stop();
    this.hub.notifyAll();
    releaseHub(this.hubKey);
    const listener = this.listener;
    this.listener = null;
    await listener?.end().catch(() => {});
    await this.pool.end();
  }
}

interface Effects {
  terminal: string[];
  deadlines: Array<number | null>;
}
