/**
 * SqliteLightningStore: the LightningStore in one SQLite file (better-sqlite3), the embedded default
 * whenever a path is given. WAL with synchronous=NORMAL, versioned migrations, IMMEDIATE transactions
 * (so several processes can share the file) that group-commit the writes of one event-loop turn, a
 * savepoint each (batched-writes.ts), and the status logic of
 * @agl/core's state machine through RolloutMutation, exactly like the in-memory store. Validation and
 * the read side come from DurableStoreBase; this file holds the SQLite transactions.
 */
import { realpathSync } from "node:fs";
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
  type ResourcesUpdate,
  type Rollout,
  type RolloutPatch,
  RolloutPatchSchema,
  type Span,
  type StartRolloutRequest,
  StoreClosedError,
  type StoreStatistics,
  spanFromReadable,
  type Worker,
} from "@agl/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import Database from "better-sqlite3";
import { z } from "zod";
import { DurableStoreBase, type Effects, newEffects, recordEffects } from "../shared/durable-store.js";
import { applyAttemptPatch, applyRolloutFields } from "../shared/patches.js";
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
import { BatchedWrites } from "./batched-writes.js";
import { migrateSqlite } from "./migrations.js";
import type { RolloutRow } from "./rows.js";
import { SqliteDb } from "./sqlite-db.js";
import { claimRollouts, expireDue, ingestSpans } from "./sqlite-ops.js";
import { SqliteQueries } from "./sqlite-queries.js";

export const SqliteStoreOptionsSchema = DurableStoreOptionsSchema.extend({
  /** How long a write waits for another process's transaction (ms, default 5000). */
  busyTimeoutMs: z.number().int().nonnegative().optional(),
}).strict();
export type SqliteStoreOptions = DurableStoreOptions & z.input<typeof SqliteStoreOptionsSchema>;

function openDatabase(path: string, busyTimeoutMs: number): Database.Database {
  const db = new Database(path, { timeout: busyTimeoutMs });
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma(`busy_timeout = ${busyTimeoutMs}`);
  db.pragma("foreign_keys = OFF");
  migrateSqlite(db);
  return db;
}

export class SqliteLightningStore extends DurableStoreBase implements LightningStore {
  readonly path: string;
  private readonly db: Database.Database;
  private readonly data: SqliteDb;
  private readonly writes: BatchedWrites;
  protected readonly queries: SqliteQueries;

  constructor(path: string, options: SqliteStoreOptions = {}) {
    const opts = parseOrThrow(SqliteStoreOptionsSchema, options, "options");
    const db = openDatabase(path, opts.busyTimeoutMs ?? 5000);
    // Instances opening the same file share one waiter hub (the file exists now, so realpath works).
    super(`sqlite:${path === ":memory:" ? `:memory:${Math.random()}` : realpathSync(path)}`, "sqlite", opts);
    this.path = path;
    this.db = db;
    this.data = new SqliteDb(db);
    this.writes = new BatchedWrites(db);
    this.queries = new SqliteQueries(this.data);
    // Deadlines left in the file (a reopen) or written by other processes.
    this.watchdog.learned(this.data.stmt.earliestDeadline.get()?.earliest ?? null);
  }

  protected enter(): SqliteDb {
    if (this.closed) throw new StoreClosedError();
    const now = nowSeconds();
    if (this.watchdog.isDue(now)) this.watchdog.learned(this.expire(now));
    return this.data;
  }

  /**
   * Run `fn` in the next group-committed IMMEDIATE transaction (batched-writes.ts), then publish its
   * effects (waiters, watchdog); resolves once committed.
   */
  private write<T>(fn: (db: SqliteDb, effects: Effects) => T): Promise<T> {
    const db = this.enter();
    const effects = newEffects();
    return this.writes.run(
      () => fn(db, effects),
      () => this.publish(effects),
    );
  }

  private persist(
    m: RolloutMutation,
    effects: Effects,
    prev: Pick<RolloutRow, "deadline" | "queue_seq"> | null,
    pop = false,
  ): void {
    this.data.persist(m, prev, pop);
    recordEffects(effects, m);
  }

  /** One watchdog pass: re-read due rollouts inside the write lock and apply each verdict once. */
  protected expire(now: number): number | null {
    const effects = newEffects();
    const pass = this.db
      .transaction(() => expireDue(this.data, now, (m, prev) => this.persist(m, effects, prev)))
      .immediate();
    this.verdicts += pass.applied;
    if (effects.terminal.length > 0) this.hub.notify(effects.terminal);
    return pass.earliest;
  }

  async statistics(): Promise<StoreStatistics> {
    const db = this.enter();
    const count = (table: string) =>
      (db.prepared<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n;
    return {
      name: "SqliteLightningStore",
      total_rollouts: count("rollouts"),
      total_attempts: count("attempts"),
      total_spans: count("spans"),
      total_resources: count("resources"),
      total_workers: count("workers"),
      uptime: nowSeconds() - this.startedAt,
      queue_length: count("rollouts WHERE queue_seq IS NOT NULL"),
      watchdog_verdicts: this.verdicts,
      pending_waiters: this.waiting,
      watchdog_deadlines: count("rollouts WHERE deadline IS NOT NULL"),
      path: this.path,
    };
  }

  // --- rollouts and the queue

  async startRollout(request: StartRolloutRequest): Promise<AttemptedRollout> {
    const req = parseOrThrow(StartRolloutSchema, request, "request");
    return this.write((db, effects) => {
      const now = nowSeconds();
      const rollout = newRollout(req, "preparing", now, db.latestResourcesId());
      db.insertRollout(rollout, null);
      const m = new RolloutMutation(rollout, null, 0, now);
      const attempt = m.newAttempt(req.worker_id ?? null);
      this.persist(m, effects, null);
      return { ...rollout, attempt };
    });
  }

  async enqueueManyRollouts(requests: EnqueueRolloutRequest[]): Promise<Rollout[]> {
    const reqs = parseOrThrow(EnqueueBatchSchema, requests, "requests");
    return this.write((db) => {
      const now = nowSeconds();
      const latest = db.latestResourcesId();
      let seq = db.stmt.nextQueueSeq.get()!.next;
      return reqs.map((req) => {
        const rollout = newRollout(req, "queuing", now, latest);
        db.insertRollout(rollout, seq++);
        return rollout;
      });
    });
  }

  async dequeueManyRollouts(options: {
    limit: number;
    workerId?: string | null;
  }): Promise<AttemptedRollout[]> {
    const { limit, workerId } = parseOrThrow(DequeueManySchema, options, "options");
    if (limit <= 0) {
      this.enter();
      return [];
    }
    return this.write((db, effects) =>
      claimRollouts(db, limit, workerId ?? null, nowSeconds(), (m, prev, pop) =>
        this.persist(m, effects, prev, pop),
      ),
    );
  }

  async startAttempt(
    rolloutId: string,
    options: { workerId?: string | null } = {},
  ): Promise<AttemptedRollout> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const { workerId } = parseOrThrow(DequeueOptionsSchema, options, "options");
    return this.write((db, effects) => {
      const loaded = db.load(rid);
      const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      const attempt = m.newAttempt(workerId ?? null);
      this.persist(m, effects, loaded.row);
      return { ...loaded.rollout, attempt };
    });
  }

  async updateRollout(rolloutId: string, patch: RolloutPatch): Promise<Rollout> {
    const rid = parseOrThrow(IdSchema, rolloutId, "rollout_id");
    const p = parseOrThrow(RolloutPatchSchema, patch, "patch");
    return this.write((db, effects) => {
      const loaded = db.load(rid);
      const rollout = loaded.rollout;
      applyRolloutFields(rollout, p);
      db.updateRolloutFields(rollout);
      const m = new RolloutMutation(rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      m.setRolloutStatus(p.status ?? rollout.status);
      this.persist(m, effects, loaded.row);
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
    return this.write((db, effects) => {
      const loaded = db.load(rid);
      const attempt = db.attempt(loaded, aid);
      const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, nowSeconds());
      applyAttemptPatch(m, attempt, p);
      this.persist(m, effects, loaded.row);
      return attempt;
    });
  }

  // --- hooks of DurableStoreBase

  protected saveResources(id: string | null, resources: NamedResources): Promise<ResourcesUpdate> {
    return this.write(() => this.queries.putResources(id, resources, nowSeconds()));
  }

  protected saveHeartbeat(
    workerId: string,
    stats: Record<string, unknown> | null | undefined,
  ): Promise<Worker> {
    return this.write(() => this.queries.heartbeatWorker(workerId, stats, nowSeconds()));
  }

  protected writeSpans(spans: Span[]): Promise<Span[]> {
    return this.write((db, effects) => this.storeSpans(db, effects, spans));
  }

  /** Check every target first (a bad span stores nothing), insert, then record one activity per attempt. */
  private storeSpans(db: SqliteDb, effects: Effects, spans: Span[]): Span[] {
    return ingestSpans(db, spans, nowSeconds(), (m, prev) => this.persist(m, effects, prev));
  }

  protected writeOtelSpan(
    rid: string,
    aid: string,
    span: ReadableSpan,
    seq: number | undefined,
  ): Promise<Span | null> {
    return this.write((db, effects) => {
      db.attempt(db.load(rid), aid);
      const converted = spanFromReadable(span, {
        rolloutId: rid,
        attemptId: aid,
        sequenceId: seq ?? db.nextSequence(rid),
      });
      const parsed = parseSpanInput(converted, "span");
      return this.storeSpans(db, effects, [parsed])[0] ?? null;
    });
  }

  protected reserveSequences(counts: Map<string, number>): Promise<Map<string, number>> {
    return this.write((db) => new Map([...counts].map(([rid, n]) => [rid, db.allocateSequences(rid, n)])));
  }

  async close(): Promise<void> {
    if (!this.shutDown()) return;
    // Writes already asked for are committed (and answered) before the file closes.
    this.writes.flush();
    this.db.close();
  }
}
