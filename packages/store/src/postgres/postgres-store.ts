/**
 * PostgresLightningStore: the LightningStore on PostgreSQL (a `pg` Pool), for many worker processes
 * sharing one database. Claims use `FOR UPDATE SKIP LOCKED`, every rollout change locks its row, span
 * inserts and state writes are batched with unnest, the per-rollout span sequence is an atomic upsert,
 * and terminal rollouts are announced with NOTIFY so waiters in other processes wake at once. Status
 * logic comes from @agl/core's state machine through RolloutMutation, as in every other store.
 * Validation and the read side come from DurableStoreBase; this file holds the PostgreSQL transactions.
 */
import {
  type Attempt,
  type AttemptedRollout,
  type AttemptPatch,
  AttemptPatchSchema,
  EnqueueBatchSchema,
  type EnqueueRolloutRequest,
  type LightningStore,
  type NamedResources,
  nowSeconds,
  parseOrThrow,
  parseSpanInput,
  parseSpanInputs,
  type ResourcesUpdate,
  type Rollout,
  type RolloutPatch,
  RolloutPatchSchema,
  type Span,
  type SpanInput,
  type StartRolloutRequest,
  StoreClosedError,
  type StoreStatistics,
  spanFromReadable,
  type Worker,
} from "@agl/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type pg from "pg";
import { z } from "zod";
import { checkAssignFlags } from "../shared/assigning-spans.js";
import { DurableStoreBase, type Effects, newEffects, recordEffects } from "../shared/durable-store.js";
import { GroupCommit, type Settled } from "../shared/group-commit.js";
import { applyRolloutFields } from "../shared/patches.js";
import { newRollout } from "../shared/records.js";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import {
  DequeueManySchema,
  DequeueOptionsSchema,
  type DurableStoreOptions,
  DurableStoreOptionsSchema,
  IdSchema,
  StartRolloutSchema,
} from "../shared/schemas.js";
import {
  type AttemptUpdate,
  type BatchWrite,
  ingestSpanBatch,
  type SpanJob,
  type StartRequest,
  startRolloutBatch,
  updateAttemptBatch,
} from "./pg-batches.js";
import { lockRollout, type PersistItem, persistMutations, type Queryable } from "./pg-db.js";
import { PgListener } from "./pg-listener.js";
import { claimRollouts, expireDue, insertRollouts, updateRolloutFields } from "./pg-ops.js";
import { PgQueries } from "./pg-queries.js";
import { ingestSpansAtOnce } from "./pg-span-ingest.js";
import { allocateBlocks } from "./pg-spans.js";
import { openMigratedPool } from "./pool.js";
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

/** The connection of a write that must run no statement besides its persisting one. */
const noStatements: Queryable = {
  query: () => {
    throw new Error("a one-statement batch ran a statement of its own");
  },
};

export class PostgresLightningStore extends DurableStoreBase implements LightningStore {
  protected readonly queries: PgQueries;
  private readonly channel: string;
  private listener: PgListener | null = null;
  // Group commit of the hot writes: concurrent calls share one transaction and one commit.
  private readonly starts = new GroupCommit<StartRequest, AttemptedRollout>((jobs) =>
    this.batch(async (_, now) => startRolloutBatch(jobs, now), { oneStatement: true }),
  );
  private readonly spanWrites = new GroupCommit<SpanJob, Span[]>((jobs) => this.ingestSpans(jobs));
  private readonly attemptUpdates = new GroupCommit<AttemptUpdate, Attempt>(
    (jobs) => this.batch((c, now) => updateAttemptBatch(c, jobs, now)),
    // Two updates of one rollout never share a batch: the second sees the first's result.
    { key: (u) => u.rid },
  );
  private readonly sequenceBlocks = new GroupCommit<Map<string, number>, Map<string, number>>((jobs) =>
    allocateBlocks(this.pool, jobs),
  );

  private constructor(
    private readonly pool: pg.Pool,
    readonly schema: string,
    opts: z.output<typeof PostgresStoreOptionsSchema>,
    url: string,
  ) {
    super(`postgres:${url}#${schema}`, "postgres", opts);
    this.queries = new PgQueries(pool);
    this.channel = `agl_terminal_${schema}`;
  }

  /** Connect, create the schema if needed, apply migrations and start the watchdog. */
  static async connect(url: string, options: PostgresStoreOptions = {}): Promise<PostgresLightningStore> {
    const opts = parseOrThrow(PostgresStoreOptionsSchema, options, "options");
    const schema = opts.schema ?? "public";
    const pool = await openMigratedPool(url, schema, opts.poolSize ?? 10);
    const store = new PostgresLightningStore(pool, schema, opts, url);
    if (opts.listen ?? true) {
      const listener = new PgListener(url, store.channel, store.hub);
      try {
        await listener.start();
      } catch (error) {
        await store.close();
        throw error;
      }
      store.listener = listener;
    }
    await store.watchdog.run(nowSeconds());
    return store;
  }

  protected override notificationsLive(): boolean {
    return this.listener?.live ?? false;
  }

  protected async enter(): Promise<void> {
    if (this.closed) throw new StoreClosedError();
    const now = nowSeconds();
    if (this.watchdog.isDue(now)) await this.watchdog.run(now);
  }

  /** Run `fn` in a transaction (retried on deadlock/serialization failure), then publish its effects. */
  private async write<T>(fn: (c: Queryable, effects: Effects) => Promise<T>): Promise<T> {
    await this.enter();
    let effects = newEffects();
    const result = await withTransaction(this.pool, async (c) => {
      // A retried transaction starts over, so do its effects.
      effects = newEffects();
      return fn(c, effects);
    });
    this.publish(effects);
    return result;
  }

  /**
   * One group-committed transaction: `fn` writes the batch's rows and returns its mutations, which
   * are persisted in the same transaction; effects are published once it has committed. With
   * `oneStatement`, `fn` runs no statement and the persisting statement is the whole write: it runs
   * on its own (atomic, and durable once answered) without BEGIN and COMMIT round trips.
   */
  private async batch<R>(
    fn: (c: Queryable, now: number) => Promise<BatchWrite<R>>,
    options: { oneStatement?: boolean } = {},
  ): Promise<Array<Settled<R>>> {
    if (this.closed) throw new StoreClosedError();
    let effects = newEffects();
    const results = await withTransaction(
      this.pool,
      async (c, tx) => {
        effects = newEffects();
        const write = await fn(options.oneStatement ? noStatements : c, nowSeconds());
        if (write.items.length === 0) {
          write.after?.({ latestResources: null });
          return write.results;
        }
        // The persisting statement is the transaction's last: COMMIT goes out right behind it, if
        // it was issued (persistMutations issues its one statement, if any, before it awaits).
        let issued = false;
        const tracked: Queryable = {
          query: ((...args: Parameters<Queryable["query"]>) => {
            issued = true;
            return c.query(...args);
          }) as Queryable["query"],
        };
        const persisting = this.persist(tracked, effects, write.items);
        if (issued && !options.oneStatement) tx.commitNow();
        write.after?.(await persisting);
        return write.results;
      },
      { begin: !options.oneStatement },
    );
    this.publish(effects);
    return results;
  }

  /**
   * A span batch: one call of agl_ingest_spans (one round trip, committed when it answers) when it
   * covers the batch, else the general transaction.
   */
  private async ingestSpans(jobs: SpanJob[]): Promise<Array<Settled<Span[]>>> {
    if (this.closed) throw new StoreClosedError();
    const now = nowSeconds();
    const atOnce = await withTransaction(this.pool, (c) => ingestSpansAtOnce(c, jobs, now), { begin: false });
    if (atOnce) {
      this.publish({ terminal: [], deadlines: atOnce.deadlines });
      return atOnce.results;
    }
    return this.batch((c, now) => ingestSpanBatch(c, jobs, now));
  }

  private async persist(
    c: Queryable,
    effects: Effects,
    items: PersistItem[],
    extraPops: string[] = [],
  ): Promise<{ latestResources: string | null }> {
    // NOTIFY (delivered at commit) wakes waiters in other processes.
    const persisted = await persistMutations(c, items, { extraPops, notifyChannel: this.channel });
    for (const { m } of items) recordEffects(effects, m);
    return persisted;
  }

  /** One watchdog pass: lock due rollouts (skipping ones another instance holds) and apply each verdict once. */
  protected async expire(now: number): Promise<number | null> {
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
    const counts = await this.queries.counts();
    return {
      name: "PostgresLightningStore",
      ...counts,
      uptime: nowSeconds() - this.startedAt,
      watchdog_verdicts: this.verdicts,
      pending_waiters: this.waiting,
      schema: this.schema,
      pool_total: this.pool.totalCount,
      pool_idle: this.pool.idleCount,
    };
  }

  // --- rollouts and the queue

  async startRollout(request: StartRolloutRequest): Promise<AttemptedRollout> {
    const req = parseOrThrow(StartRolloutSchema, request, "request");
    await this.enter();
    return this.starts.submit(req);
  }

  async enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]> {
    const reqs = parseOrThrow(EnqueueBatchSchema, requests, "requests");
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

  async updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const p = parseOrThrow(RolloutPatchSchema, patch, "patch");
    return this.write(async (c, effects) => {
      const loaded = await lockRollout(c, rid);
      const rollout = loaded.rollout;
      applyRolloutFields(rollout, p);
      await updateRolloutFields(c, rollout);
      const m = new RolloutMutation(rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      m.setRolloutStatus(p.status ?? rollout.status);
      await this.persist(c, effects, [{ m, prev: loaded.row }]);
      return rollout;
    });
  }

  // --- attempts

  async updateAttempt(
    rolloutId: string,
    attemptId: string | "latest",
    patch: AttemptPatch,
  ): Promise<Attempt> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const aid = parseOrThrow(IdSchema, attemptId, "attempt_id");
    const p = parseOrThrow(AttemptPatchSchema, patch, "patch");
    await this.enter();
    return this.attemptUpdates.submit({ rid, aid, patch: p });
  }

  // --- hooks of DurableStoreBase

  protected saveResources(id: string | null, resources: NamedResources): Promise<ResourcesUpdate> {
    return this.queries.putResources(id, resources, nowSeconds());
  }

  protected saveHeartbeat(
    workerId: string,
    stats: Record<string, unknown> | null | undefined,
  ): Promise<Worker> {
    return this.queries.heartbeatWorker(workerId, stats, nowSeconds());
  }

  protected writeSpans(spans: Span[]): Promise<Span[]> {
    return this.spanWrites.submit({ spans });
  }

  /** Spans of which some get their sequence ids in the statement that inserts them (see pg-spans.ts). */
  async addManySpansAssigningSequences(spans: SpanInput[], assign: readonly boolean[]): Promise<Span[]> {
    const parsed = parseSpanInputs(spans, "spans");
    checkAssignFlags(parsed, assign);
    await this.enter();
    if (parsed.length === 0) return [];
    return this.spanWrites.submit({ spans: parsed, assign: [...assign] });
  }

  protected writeOtelSpan(
    rid: string,
    aid: string,
    span: ReadableSpan,
    seq: number | undefined,
  ): Promise<Span | null> {
    // Without a sequence id: a placeholder, replaced by the next id where the span is inserted.
    const converted = spanFromReadable(span, { rolloutId: rid, attemptId: aid, sequenceId: seq ?? 0 });
    const parsed = parseSpanInput(converted, "span");
    return this.spanWrites.submit({ spans: [parsed], assign: [seq === undefined] }).then((s) => s[0] ?? null);
  }

  /** Concurrent reservations share one atomic statement (it returns each rollout's last id). */
  protected reserveSequences(counts: Map<string, number>): Promise<Map<string, number>> {
    return this.sequenceBlocks.submit(counts);
  }

  async close(): Promise<void> {
    if (!this.shutDown()) return;
    const listener = this.listener;
    this.listener = null;
    await listener?.stop();
    await this.pool.end();
  }
}
