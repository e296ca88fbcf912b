/**
 * The PostgreSQL store's data access: loading (and row-locking) rollouts for a mutation, and writing
 * mutations back in batches (one statement per table via unnest), so a transaction costs a handful of
 * round trips however many rollouts, attempts or spans it touches.
 */
import { type Attempt, NotFoundError, type Rollout, type Span } from "@agl/core";
import type pg from "pg";
import { foldWorkerEvents, type RolloutMutation, type WorkerEvent } from "../shared/rollout-mutation.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";

export type Queryable = Pick<pg.ClientBase, "query">;

export interface PgRolloutRow {
  rollout_id: string;
  input: unknown;
  input_absent: boolean;
  start_time: number;
  end_time: number | null;
  mode: Rollout["mode"];
  resources_id: string | null;
  status: Rollout["status"];
  config: Rollout["config"];
  metadata: Rollout["metadata"];
  queue_seq: string | null;
  deadline: number | null;
  attempt_count: number;
  /** The latest attempt (row_to_json), when selected with ROLLOUT_WITH_LATEST. */
  latest?: Attempt | null;
}

export const ROLLOUT_COLS = "r.*, (r.input IS NULL) AS input_absent";
/** Rollouts with their latest attempt, for `FROM rollouts r` queries. */
export const ROLLOUT_WITH_LATEST = `SELECT ${ROLLOUT_COLS}, row_to_json(a) AS latest
  FROM rollouts r LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count`;

export function rolloutFromPg(row: PgRolloutRow): Rollout {
  return {
    rollout_id: row.rollout_id,
    input: row.input_absent ? undefined : row.input,
    start_time: row.start_time,
    end_time: row.end_time,
    mode: row.mode,
    resources_id: row.resources_id,
    status: row.status,
    config: row.config,
    metadata: row.metadata,
  };
}

/** An attempt row (from a table or row_to_json) in the wire shape. */
export function attemptFromPg(row: Attempt & { pk?: unknown }): Attempt {
  return {
    rollout_id: row.rollout_id,
    attempt_id: row.attempt_id,
    sequence_id: row.sequence_id,
    start_time: row.start_time,
    end_time: row.end_time,
    status: row.status,
    worker_id: row.worker_id,
    last_heartbeat_time: row.last_heartbeat_time,
    metadata: row.metadata,
  };
}

export interface PgLoaded {
  row: PgRolloutRow;
  rollout: Rollout;
  latest: Attempt | null;
}

function loadedFrom(row: PgRolloutRow): PgLoaded {
  return { row, rollout: rolloutFromPg(row), latest: row.latest ? attemptFromPg(row.latest) : null };
}

/** Lock and load rollouts (in id order, so concurrent transactions never deadlock on them). */
export async function lockRollouts(c: Queryable, ids: readonly string[]): Promise<Map<string, PgLoaded>> {
  const { rows } = await c.query<PgRolloutRow>(
    `${ROLLOUT_WITH_LATEST} WHERE r.rollout_id = ANY($1::text[]) ORDER BY r.rollout_id FOR UPDATE OF r`,
    [[...new Set(ids)]],
  );
  const out = new Map<string, PgLoaded>();
  for (const row of rows) out.set(row.rollout_id, loadedFrom(row));
  for (const id of ids) if (!out.has(id)) throw new NotFoundError("rollout", id, `Rollout ${id} not found`);
  return out;
}

export async function lockRollout(c: Queryable, id: string): Promise<PgLoaded> {
  return (await lockRollouts(c, [id])).get(id)!;
}

/** Rows of `sql` (selecting ROLLOUT_WITH_LATEST columns) as loaded rollouts. */
export async function loadRolloutsWhere(c: Queryable, sql: string, params: unknown[]): Promise<PgLoaded[]> {
  const { rows } = await c.query<PgRolloutRow>(sql, params);
  return rows.map(loadedFrom);
}

/**
 * The attempts `aids` of loaded rollouts ("latest" allowed); the latest is the same object as
 * `loaded.latest`, so changes through either are one change. Throws NotFoundError for a missing one.
 */
export async function loadAttempts(
  c: Queryable,
  targets: ReadonlyArray<{ loaded: PgLoaded; aid: string }>,
): Promise<Map<string, Attempt>> {
  const out = new Map<string, Attempt>();
  const missing: Array<{ loaded: PgLoaded; aid: string }> = [];
  for (const t of targets) {
    const latest = t.loaded.latest;
    if (latest && (t.aid === "latest" || t.aid === latest.attempt_id))
      out.set(key(t.loaded.rollout.rollout_id, t.aid), latest);
    else if (t.aid !== "latest") missing.push(t);
    else throw notFound(t.loaded.rollout.rollout_id, t.aid);
  }
  if (missing.length > 0) {
    const { rows } = await c.query<Attempt>(
      `SELECT a.* FROM attempts a JOIN unnest($1::text[], $2::text[]) AS t(rid, aid)
       ON a.rollout_id = t.rid AND a.attempt_id = t.aid`,
      [missing.map((t) => t.loaded.rollout.rollout_id), missing.map((t) => t.aid)],
    );
    for (const row of rows) out.set(key(row.rollout_id, row.attempt_id), attemptFromPg(row));
    for (const t of missing)
      if (!out.has(key(t.loaded.rollout.rollout_id, t.aid)))
        throw notFound(t.loaded.rollout.rollout_id, t.aid);
  }
  return out;
}

export const key = (rid: string, aid: string): string => `${rid}\u0000${aid}`;
const notFound = (rid: string, aid: string) =>
  new NotFoundError("attempt", aid, `Attempt ${aid} not found for rollout ${rid}`);

export interface PersistItem {
  m: RolloutMutation;
  /** The row as loaded; null for a rollout inserted in this transaction (always written). */
  prev: Pick<PgRolloutRow, "deadline" | "queue_seq"> | null;
  /** Remove from the queue (just claimed). */
  pop?: boolean;
}

/** Write mutations back: rollout state, new and changed attempts, worker events. */
export async function persistMutations(
  c: Queryable,
  items: readonly PersistItem[],
  extraPops: readonly string[] = [],
): Promise<void> {
  const rollouts = items.filter(
    (i) => i.pop || i.prev === null || i.m.needsRolloutWrite(i.prev.deadline, i.prev.queue_seq !== null),
  );
  if (rollouts.length > 0 || extraPops.length > 0) {
    const pops = extraPops.map((id) => ({ id }));
    await c.query(
      `UPDATE rollouts r SET
         status = COALESCE(u.status, r.status),
         end_time = CASE WHEN u.status IS NULL THEN r.end_time ELSE u.end_time END,
         deadline = CASE WHEN u.status IS NULL THEN r.deadline ELSE u.deadline END,
         attempt_count = COALESCE(u.attempt_count, r.attempt_count),
         queue_seq = CASE WHEN u.pop THEN NULL
           WHEN u.enqueue AND r.queue_seq IS NULL THEN nextval('rollout_queue_seq')
           ELSE r.queue_seq END
       FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::int[], $6::bool[], $7::bool[])
         AS u(rollout_id, status, end_time, deadline, attempt_count, pop, enqueue)
       WHERE r.rollout_id = u.rollout_id`,
      [
        [...rollouts.map((i) => i.m.rollout.rollout_id), ...pops.map((p) => p.id)],
        [...rollouts.map((i) => i.m.rollout.status), ...pops.map(() => null)],
        [...rollouts.map((i) => i.m.rollout.end_time), ...pops.map(() => null)],
        [...rollouts.map((i) => i.m.deadline), ...pops.map(() => null)],
        [...rollouts.map((i) => i.m.attemptCount), ...pops.map(() => null)],
        [...rollouts.map((i) => i.pop === true), ...pops.map(() => true)],
        [...rollouts.map((i) => i.m.enqueue), ...pops.map(() => false)],
      ],
    );
  }
  const created = items.flatMap((i) => i.m.created);
  if (created.length > 0) {
    await c.query(
      `INSERT INTO attempts (rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, last_heartbeat_time, metadata)
       SELECT rid, aid, seq, st, et, status, wid, hb, md::jsonb
       FROM unnest($1::text[], $2::text[], $3::int[], $4::float8[], $5::float8[], $6::text[], $7::text[], $8::float8[], $9::text[])
         AS t(rid, aid, seq, st, et, status, wid, hb, md)`,
      attemptColumns(created),
    );
  }
  const changed = items.flatMap((i) => [...i.m.changed.values()]);
  if (changed.length > 0) {
    await c.query(
      `UPDATE attempts a SET end_time = t.et, status = t.status, worker_id = t.wid, last_heartbeat_time = t.hb, metadata = t.md::jsonb
       FROM unnest($1::text[], $2::text[], $3::int[], $4::float8[], $5::float8[], $6::text[], $7::text[], $8::float8[], $9::text[])
         AS t(rid, aid, seq, st, et, status, wid, hb, md)
       WHERE a.rollout_id = t.rid AND a.attempt_id = t.aid`,
      attemptColumns(changed),
    );
  }
  const now = items[0]?.m.now ?? Date.now() / 1000;
  await applyWorkerEvents(
    c,
    items.flatMap((i) => i.m.workerEvents),
    now,
  );
}

function attemptColumns(attempts: readonly Attempt[]): unknown[] {
  return [
    attempts.map((a) => a.rollout_id),
    attempts.map((a) => a.attempt_id),
    attempts.map((a) => a.sequence_id),
    attempts.map((a) => a.start_time),
    attempts.map((a) => a.end_time),
    attempts.map((a) => a.status),
    attempts.map((a) => a.worker_id),
    attempts.map((a) => a.last_heartbeat_time),
    attempts.map((a) => toJsonRequired(a.metadata, "metadata")),
  ];
}

/**
 * Apply worker events in one statement, folded per worker: existing workers are updated with the
 * busy/idle timestamp rules of setWorkerStatus (CASE sees the old status); new ones are inserted. A
 * worker created concurrently by another transaction falls back to a plain upsert.
 */
export async function applyWorkerEvents(
  c: Queryable,
  events: readonly WorkerEvent[],
  now: number,
): Promise<void> {
  if (events.length === 0) return;
  const folded = foldWorkerEvents(events);
  await c.query(
    `WITH t AS (
       SELECT * FROM unnest($2::text[], $3::text[], $4::bool[], $5::bool[], $6::bool[], $7::bool[], $8::bool[], $9::text[], $10::text[])
         AS t(wid, status, deq, bf, bl, idf, il, rid, aid)
     ), upd AS (
       UPDATE workers w SET
         last_busy_time = CASE WHEN t.bl OR (t.bf AND w.status <> 'busy') THEN $1::float8 ELSE w.last_busy_time END,
         last_idle_time = CASE WHEN t.il OR (t.idf AND w.status <> 'idle') THEN $1::float8 ELSE w.last_idle_time END,
         status = t.status,
         current_rollout_id = t.rid,
         current_attempt_id = t.aid,
         last_dequeue_time = CASE WHEN t.deq THEN $1::float8 ELSE w.last_dequeue_time END
       FROM t WHERE w.worker_id = t.wid
       RETURNING w.worker_id
     )
     INSERT INTO workers (worker_id, status, last_dequeue_time, last_busy_time, last_idle_time, current_rollout_id, current_attempt_id)
     SELECT wid, status, CASE WHEN deq THEN $1::float8 END,
       CASE WHEN bf OR bl THEN $1::float8 END, CASE WHEN idf OR il THEN $1::float8 END, rid, aid
     FROM t WHERE wid NOT IN (SELECT worker_id FROM upd)
     ON CONFLICT (worker_id) DO UPDATE SET
       last_busy_time = CASE WHEN EXCLUDED.last_busy_time IS NOT NULL AND workers.status <> 'busy'
         THEN EXCLUDED.last_busy_time ELSE workers.last_busy_time END,
       last_idle_time = CASE WHEN EXCLUDED.last_idle_time IS NOT NULL AND workers.status <> 'idle'
         THEN EXCLUDED.last_idle_time ELSE workers.last_idle_time END,
       status = EXCLUDED.status,
       current_rollout_id = EXCLUDED.current_rollout_id,
       current_attempt_id = EXCLUDED.current_attempt_id,
       last_dequeue_time = COALESCE(EXCLUDED.last_dequeue_time, workers.last_dequeue_time)`,
    [
      now,
      folded.map((e) => e.workerId),
      folded.map((e) => e.status),
      folded.map((e) => e.dequeued),
      folded.map((e) => e.busyFirst),
      folded.map((e) => e.busyLater),
      folded.map((e) => e.idleFirst),
      folded.map((e) => e.idleLater),
      folded.map((e) => e.current?.rolloutId ?? null),
      folded.map((e) => e.current?.attemptId ?? null),
    ],
  );
}

/** Insert spans (duplicates of (rid, aid, span_id) skipped); returns the keys stored. Bumps the counters. */
export async function insertSpans(c: Queryable, spans: readonly Span[]): Promise<Set<string>> {
  const { rows } = await c.query<{ rollout_id: string; attempt_id: string; span_id: string }>(
    `INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time, end_time, data)
     SELECT rid, aid, seq, tid, sid, pid, name, st, et, data::jsonb
     FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::float8[], $10::text[])
       WITH ORDINALITY AS t(rid, aid, seq, tid, sid, pid, name, st, et, data, ord)
     ORDER BY ord
     ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
     RETURNING rollout_id, attempt_id, span_id`,
    [
      spans.map((s) => s.rollout_id),
      spans.map((s) => s.attempt_id),
      spans.map((s) => s.sequence_id),
      spans.map((s) => s.trace_id),
      spans.map((s) => s.span_id),
      spans.map((s) => s.parent_id),
      spans.map((s) => s.name),
      spans.map((s) => s.start_time),
      spans.map((s) => s.end_time),
      spans.map((s) => toJsonRequired(s, "span")),
    ],
  );
  const stored = new Set(rows.map((r) => `${key(r.rollout_id, r.attempt_id)}\u0000${r.span_id}`));
  const maxSeq = new Map<string, number>();
  for (const s of spans) {
    if (!stored.has(`${key(s.rollout_id, s.attempt_id)}\u0000${s.span_id}`)) continue;
    maxSeq.set(s.rollout_id, Math.max(maxSeq.get(s.rollout_id) ?? 0, s.sequence_id));
  }
  if (maxSeq.size > 0) {
    await c.query(
      `INSERT INTO span_sequences (rollout_id, value) SELECT * FROM unnest($1::text[], $2::int[])
       ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(span_sequences.value, EXCLUDED.value)`,
      [[...maxSeq.keys()], [...maxSeq.values()]],
    );
  }
  return stored;
}

/** Allocate `count` consecutive sequence ids per rollout atomically; returns the last one of each. */
export async function allocateSequences(
  c: Queryable,
  counts: ReadonlyMap<string, number>,
): Promise<Map<string, number>> {
  const { rows } = await c.query<{ rollout_id: string; value: number }>(
    `INSERT INTO span_sequences (rollout_id, value) SELECT * FROM unnest($1::text[], $2::int[])
     ON CONFLICT (rollout_id) DO UPDATE SET value = span_sequences.value + EXCLUDED.value
     RETURNING rollout_id, value`,
    [[...counts.keys()], [...counts.values()]],
  );
  return new Map(rows.map((r) => [r.rollout_id, r.value]));
}

export { toJson };
