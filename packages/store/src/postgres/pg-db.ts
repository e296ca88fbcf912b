/**
 * The PostgreSQL store's data access: loading (and row-locking) rollouts for a mutation, and writing
 * mutations back in batches (one statement per table via unnest), so a transaction costs a handful of
 * round trips however many rollouts, attempts or spans it touches.
 */
import { type Attempt, NotFoundError, type Rollout } from "@agl/core";
import type pg from "pg";
import {
  type FoldedWorkerEvent,
  foldWorkerEvents,
  type RolloutMutation,
  type WorkerEvent,
} from "../shared/rollout-mutation.js";
import { alreadyDecoded, attemptFromColumns, rolloutFromColumns } from "../shared/row-mapping.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";

export type Queryable = Pick<pg.ClientBase, "query">;

const statementNames = new Map<string, string>();
/**
 * The query as a named (prepared) statement: each connection parses and plans a statement shape once
 * and then only binds values. Shapes are few (the batch statements vary only by which CTEs they
 * hold); past a bound, further shapes run unnamed rather than grow the server's per-connection cache.
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    if (statementNames.size >= 256) return { text, values };
    name = `agl_s${statementNames.size}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

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
  /** The latest attempt (row_to_json, with ROLLOUT_WITH_LATEST or agl_lock_rollouts). */
  latest?: Attempt | null;
}

export const ROLLOUT_COLS = "r.*, (r.input IS NULL) AS input_absent";
/** Rollouts with their latest attempt, for `FROM rollouts r` queries. */
export const ROLLOUT_WITH_LATEST = `SELECT ${ROLLOUT_COLS}, row_to_json(a) AS latest
  FROM rollouts r LEFT JOIN attempts a ON a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count`;

export const rolloutFromPg = (row: PgRolloutRow): Rollout =>
  rolloutFromColumns(row, row.input_absent ? undefined : row.input, alreadyDecoded);

/** An attempt row (from a table or row_to_json) in the wire shape. */
export const attemptFromPg = (row: Attempt & { pk?: unknown }): Attempt =>
  attemptFromColumns(row, alreadyDecoded);

export interface PgLoaded {
  row: PgRolloutRow;
  rollout: Rollout;
  latest: Attempt | null;
}

export function loadedFrom(row: PgRolloutRow): PgLoaded {
  return { row, rollout: rolloutFromPg(row), latest: row.latest ? attemptFromPg(row.latest) : null };
}

/** Lock and load rollouts (in id order, so concurrent transactions never deadlock on them). */
export async function lockRollouts(c: Queryable, ids: readonly string[]): Promise<Map<string, PgLoaded>> {
  const out = await lockExistingRollouts(c, ids);
  for (const id of ids) if (!out.has(id)) throw rolloutNotFound(id);
  return out;
}

/**
 * lockRollouts without the check: the ones that exist (a batch checks each of its calls itself). One
 * call of migration 5's agl_lock_rollouts: the locks (in id order, so concurrent transactions never
 * deadlock on them), then the rows with their latest attempts read by a statement whose snapshot is
 * taken once the locks are held (see the migration), in one round trip.
 */
export async function lockExistingRollouts(
  c: Queryable,
  ids: readonly string[],
): Promise<Map<string, PgLoaded>> {
  const { rows } = await c.query<PgRolloutRow>({
    name: "agl_lock_rollouts",
    text: "SELECT * FROM agl_lock_rollouts($1::text[])",
    values: [[...new Set(ids)]],
  });
  const out = new Map<string, PgLoaded>();
  for (const row of rows) out.set(row.rollout_id, loadedFrom(row));
  return out;
}

export const rolloutNotFound = (id: string): NotFoundError =>
  new NotFoundError("rollout", id, `Rollout ${id} not found`);

/**
 * Set `latest` of locked rollout rows (the watchdog's pass), in a statement of its own. Under READ COMMITTED a locking
 * statement that waited for another transaction re-reads only the rows it locks: an attempt joined to
 * them would be the version from before that transaction, and writing it back would undo its change
 * (a succeeded attempt back to running, or a second success let through). This statement's snapshot
 * is taken after the locks are held, so it sees every commit of a transaction that held them.
 */
export async function readLatestAttempts(c: Queryable, rows: PgRolloutRow[]): Promise<void> {
  for (const row of rows) row.latest = null;
  const withAttempts = rows.filter((r) => r.attempt_count > 0);
  if (withAttempts.length === 0) return;
  const { rows: attempts } = await c.query<Attempt>({
    name: "agl_read_latest_attempts",
    text: `SELECT a.* FROM attempts a JOIN unnest($1::text[], $2::int[]) AS t(rid, seq)
     ON a.rollout_id = t.rid AND a.sequence_id = t.seq`,
    values: [withAttempts.map((r) => r.rollout_id), withAttempts.map((r) => r.attempt_count)],
  });
  const byRollout = new Map(attempts.map((a) => [a.rollout_id, a]));
  for (const row of withAttempts) row.latest = byRollout.get(row.rollout_id) ?? null;
}

export async function lockRollout(c: Queryable, id: string): Promise<PgLoaded> {
  return (await lockRollouts(c, [id])).get(id)!;
}

/**
 * The attempts `aids` of loaded rollouts ("latest" allowed); the latest is the same object as
 * `loaded.latest`, so changes through either are one change. Throws NotFoundError for a missing one.
 */
export async function loadAttempts(
  c: Queryable,
  targets: ReadonlyArray<{ loaded: PgLoaded; aid: string }>,
): Promise<Map<string, Attempt>> {
  const out = await findAttempts(c, targets);
  for (const t of targets)
    if (!out.has(key(t.loaded.rollout.rollout_id, t.aid)))
      throw attemptNotFound(t.loaded.rollout.rollout_id, t.aid);
  return out;
}

/** loadAttempts without the check: the attempts that exist, by key(rid, aid). */
export async function findAttempts(
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
  }
  if (missing.length > 0) {
    const { rows } = await c.query<Attempt>({
      name: "agl_find_attempts",
      text: `SELECT a.* FROM attempts a JOIN unnest($1::text[], $2::text[]) AS t(rid, aid)
       ON a.rollout_id = t.rid AND a.attempt_id = t.aid`,
      values: [missing.map((t) => t.loaded.rollout.rollout_id), missing.map((t) => t.aid)],
    });
    for (const row of rows) out.set(key(row.rollout_id, row.attempt_id), attemptFromPg(row));
  }
  return out;
}

export const key = (rid: string, aid: string): string => `${rid}\u0000${aid}`;
export const attemptNotFound = (rid: string, aid: string): NotFoundError =>
  new NotFoundError("attempt", aid, `Attempt ${aid} not found for rollout ${rid}`);

export interface PersistItem {
  m: RolloutMutation;
  /** The row as loaded; null for a rollout inserted in this transaction (always written). */
  prev: Pick<PgRolloutRow, "deadline" | "queue_seq"> | null;
  /** Remove from the queue (just claimed). */
  pop?: boolean;
  /**
   * A new rollout the statement INSERTs in its final state (no UPDATE after the insert); a null
   * `resources_id` becomes the latest resources id, which persistMutations returns.
   */
  insert?: true;
}

/**
 * Write mutations back in ONE statement (data-modifying CTEs, one per table): rollout state, new and
 * changed attempts, worker events and the NOTIFY of rollouts that became terminal. Round trips, not
 * rows, dominate a transaction's cost, so this keeps every write transaction at a handful of them.
 */
export async function persistMutations(
  c: Queryable,
  items: readonly PersistItem[],
  options: {
    extraPops?: readonly string[];
    notifyChannel?: string;
    workerEvents?: readonly WorkerEvent[];
    now?: number;
  } = {},
): Promise<{ latestResources: string | null }> {
  const params: unknown[] = [];
  const p = (value: unknown) => `$${params.push(value)}`;
  const ctes: string[] = [];
  const now = options.now ?? items[0]?.m.now ?? Date.now() / 1000;

  const inserts = items.filter((i) => i.insert).map((i) => i.m);
  if (inserts.length > 0) ctes.push(...insertRolloutCtes(inserts, p));
  const rollouts = items.filter(
    (i) =>
      !i.insert &&
      (i.pop || i.prev === null || i.m.needsRolloutWrite(i.prev.deadline, i.prev.queue_seq !== null)),
  );
  const pops = options.extraPops ?? [];
  if (rollouts.length > 0 || pops.length > 0) {
    const col = <T>(f: (i: PersistItem) => T, popValue: T) => [
      ...rollouts.map(f),
      ...pops.map(() => popValue),
    ];
    ctes.push(`r_upd AS (UPDATE rollouts r SET
         status = COALESCE(u.status, r.status),
         end_time = CASE WHEN u.status IS NULL THEN r.end_time ELSE u.end_time END,
         deadline = CASE WHEN u.status IS NULL THEN r.deadline ELSE u.deadline END,
         attempt_count = COALESCE(u.attempt_count, r.attempt_count),
         queue_seq = CASE WHEN u.pop THEN NULL
           WHEN u.enqueue AND r.queue_seq IS NULL THEN nextval('rollout_queue_seq')
           ELSE r.queue_seq END
       FROM unnest(${p([...rollouts.map((i) => i.m.rollout.rollout_id), ...pops])}::text[], ${p(col((i) => i.m.rollout.status, null))}::text[],
         ${p(col((i) => i.m.rollout.end_time, null))}::float8[], ${p(col((i) => i.m.deadline, null))}::float8[],
         ${p(col((i) => i.m.attemptCount, null))}::int[], ${p(col((i) => i.pop === true, true))}::bool[],
         ${p(col((i) => i.m.enqueue, false))}::bool[])
         AS u(rollout_id, status, end_time, deadline, attempt_count, pop, enqueue)
       WHERE r.rollout_id = u.rollout_id RETURNING 1)`);
  }
  const attemptsFrom = (attempts: readonly Attempt[]) =>
    `unnest(${attemptColumns(attempts)
      .map((values, i) => `${p(values)}::${ATTEMPT_TYPES[i]}[]`)
      .join(", ")}) AS t(rid, aid, seq, st, et, status, wid, hb, md)`;
  const created = items.flatMap((i) => i.m.created);
  if (created.length > 0) {
    ctes.push(`a_ins AS (INSERT INTO attempts
         (rollout_id, attempt_id, sequence_id, start_time, end_time, status, worker_id, last_heartbeat_time, metadata)
       SELECT rid, aid, seq, st, et, status, wid, hb, md::jsonb FROM ${attemptsFrom(created)} RETURNING 1)`);
  }
  const changed = items.flatMap((i) => [...i.m.changed.values()]);
  if (changed.length > 0) {
    ctes.push(`a_upd AS (UPDATE attempts a SET end_time = t.et, status = t.status, worker_id = t.wid,
         last_heartbeat_time = t.hb, metadata = t.md::jsonb
       FROM ${attemptsFrom(changed)} WHERE a.rollout_id = t.rid AND a.attempt_id = t.aid RETURNING 1)`);
  }
  const events = [...items.flatMap((i) => i.m.workerEvents), ...(options.workerEvents ?? [])];
  if (events.length > 0) ctes.push(...workerCtes(foldWorkerEvents(events), p(now), p));
  const terminal = items.filter((i) => i.m.terminal).map((i) => i.m.rollout.rollout_id);
  const notifies: string[] = [];
  if (options.notifyChannel && terminal.length > 0) {
    // Payloads stay under PostgreSQL's 8000-byte limit; delivered at COMMIT.
    for (let i = 0; i < terminal.length; i += 200) {
      notifies.push(`pg_notify(${p(options.notifyChannel)}, ${p(terminal.slice(i, i + 200).join(","))})`);
    }
  }
  if (ctes.length === 0 && notifies.length === 0) return { latestResources: null };
  const outputs = [...notifies, inserts.length > 0 ? "(SELECT resources_id FROM latest) AS latest" : "1"];
  const select = `SELECT ${outputs.join(", ")}`;
  const { rows } = await c.query<{ latest?: string | null }>(
    prepared(ctes.length > 0 ? `WITH ${ctes.join(",\n")} ${select}` : select, params),
  );
  return { latestResources: rows[0]?.latest ?? null };
}

/**
 * New rollouts inserted with their mutation's final state (status, attempt count, deadline), in
 * order; a null resources id takes the latest resources, read by the same statement.
 */
function insertRolloutCtes(ms: readonly RolloutMutation[], p: (value: unknown) => string): string[] {
  const r = ms.map((m) => m.rollout);
  return [
    "latest AS (SELECT resources_id FROM resources ORDER BY touch_seq DESC LIMIT 1)",
    `r_ins AS (INSERT INTO rollouts (rollout_id, input, start_time, end_time, mode, resources_id, status, config,
         metadata, deadline, attempt_count, queue_seq)
       SELECT rid, input::jsonb, st, et, mode, COALESCE(res, (SELECT resources_id FROM latest)), status,
         config::jsonb, md::jsonb, dl, ac, CASE WHEN enq THEN nextval('rollout_queue_seq') END
       FROM unnest(${p(r.map((x) => x.rollout_id))}::text[], ${p(r.map((x) => toJson(x.input, "input")))}::text[],
         ${p(r.map((x) => x.start_time))}::float8[], ${p(r.map((x) => x.end_time))}::float8[],
         ${p(r.map((x) => x.mode))}::text[], ${p(r.map((x) => x.resources_id))}::text[],
         ${p(r.map((x) => x.status))}::text[], ${p(r.map((x) => toJsonRequired(x.config, "config")))}::text[],
         ${p(r.map((x) => toJsonRequired(x.metadata, "metadata")))}::text[], ${p(ms.map((m) => m.deadline))}::float8[],
         ${p(ms.map((m) => m.attemptCount))}::int[], ${p(ms.map((m) => m.enqueue))}::bool[])
         WITH ORDINALITY AS t(rid, input, st, et, mode, res, status, config, md, dl, ac, enq, ord)
       ORDER BY ord RETURNING 1)`,
  ];
}

const ATTEMPT_TYPES = ["text", "text", "int", "float8", "float8", "text", "text", "float8", "text"];

function attemptColumns(attempts: readonly Attempt[]): unknown[][] {
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
 * Worker events folded per worker: existing workers are updated with the busy/idle timestamp rules of
 * setWorkerStatus (CASE sees the old status); new ones are inserted. A worker created concurrently by
 * another transaction falls back to a plain upsert.
 */
function workerCtes(
  folded: readonly FoldedWorkerEvent[],
  now: string,
  p: (value: unknown) => string,
): string[] {
  const cols = [
    [folded.map((e) => e.workerId), "text"],
    [folded.map((e) => e.status), "text"],
    [folded.map((e) => e.dequeued), "bool"],
    [folded.map((e) => e.busyFirst), "bool"],
    [folded.map((e) => e.busyLater), "bool"],
    [folded.map((e) => e.idleFirst), "bool"],
    [folded.map((e) => e.idleLater), "bool"],
    [folded.map((e) => e.current?.rolloutId ?? null), "text"],
    [folded.map((e) => e.current?.attemptId ?? null), "text"],
  ] as const;
  return [
    `w_t AS (SELECT * FROM unnest(${cols.map(([values, type]) => `${p(values)}::${type}[]`).join(", ")})
       AS t(wid, status, deq, bf, bl, idf, il, rid, aid))`,
    `w_upd AS (UPDATE workers w SET
       last_busy_time = CASE WHEN t.bl OR (t.bf AND w.status <> 'busy') THEN ${now}::float8 ELSE w.last_busy_time END,
       last_idle_time = CASE WHEN t.il OR (t.idf AND w.status <> 'idle') THEN ${now}::float8 ELSE w.last_idle_time END,
       status = t.status, current_rollout_id = t.rid, current_attempt_id = t.aid,
       last_dequeue_time = CASE WHEN t.deq THEN ${now}::float8 ELSE w.last_dequeue_time END
     FROM w_t t WHERE w.worker_id = t.wid RETURNING w.worker_id)`,
    `w_ins AS (INSERT INTO workers
       (worker_id, status, last_dequeue_time, last_busy_time, last_idle_time, current_rollout_id, current_attempt_id)
     SELECT wid, status, CASE WHEN deq THEN ${now}::float8 END,
       CASE WHEN bf OR bl THEN ${now}::float8 END, CASE WHEN idf OR il THEN ${now}::float8 END, rid, aid
     FROM w_t WHERE wid NOT IN (SELECT worker_id FROM w_upd)
     ON CONFLICT (worker_id) DO UPDATE SET
       last_busy_time = CASE WHEN EXCLUDED.last_busy_time IS NOT NULL AND workers.status <> 'busy'
         THEN EXCLUDED.last_busy_time ELSE workers.last_busy_time END,
       last_idle_time = CASE WHEN EXCLUDED.last_idle_time IS NOT NULL AND workers.status <> 'idle'
         THEN EXCLUDED.last_idle_time ELSE workers.last_idle_time END,
       status = EXCLUDED.status,
       current_rollout_id = EXCLUDED.current_rollout_id,
       current_attempt_id = EXCLUDED.current_attempt_id,
       last_dequeue_time = COALESCE(EXCLUDED.last_dequeue_time, workers.last_dequeue_time)
     RETURNING 1)`,
  ];
}

export { toJson };
