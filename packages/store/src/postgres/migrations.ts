/**
 * Versioned schema of the PostgreSQL store, applied under a transaction-scoped advisory lock so that
 * processes starting together migrate once. Each migration is recorded in `schema_migrations`.
 * Append new migrations; never edit a released one.
 */
import type pg from "pg";

export interface PgMigration {
  version: number;
  name: string;
  sql: string;
}

export const POSTGRES_MIGRATIONS: readonly PgMigration[] = [
  {
    version: 1,
    name: "initial schema",
    sql: `
      CREATE SEQUENCE rollout_queue_seq;
      CREATE SEQUENCE resources_touch_seq;

      CREATE TABLE rollouts (
        pk BIGSERIAL PRIMARY KEY,                   -- insertion order
        rollout_id TEXT NOT NULL UNIQUE,
        input JSONB,                                -- SQL NULL = no input given; JSON null is 'null'
        start_time DOUBLE PRECISION NOT NULL,
        end_time DOUBLE PRECISION,
        mode TEXT,
        resources_id TEXT,
        status TEXT NOT NULL,
        config JSONB NOT NULL,
        metadata JSONB NOT NULL,
        queue_seq BIGINT,                           -- FIFO position; NULL = not in the queue
        deadline DOUBLE PRECISION,                  -- next watchdog deadline; NULL = none
        attempt_count INTEGER NOT NULL DEFAULT 0    -- = sequence_id of the latest attempt
      );
      CREATE INDEX rollouts_queue ON rollouts (queue_seq, status) WHERE queue_seq IS NOT NULL;
      CREATE INDEX rollouts_status ON rollouts (status, pk);
      CREATE INDEX rollouts_deadline ON rollouts (deadline) WHERE deadline IS NOT NULL;

      CREATE TABLE attempts (
        pk BIGSERIAL PRIMARY KEY,
        rollout_id TEXT NOT NULL,
        attempt_id TEXT NOT NULL,
        sequence_id INTEGER NOT NULL,
        start_time DOUBLE PRECISION NOT NULL,
        end_time DOUBLE PRECISION,
        status TEXT NOT NULL,
        worker_id TEXT,
        last_heartbeat_time DOUBLE PRECISION,
        metadata JSONB NOT NULL,
        UNIQUE (rollout_id, attempt_id),
        UNIQUE (rollout_id, sequence_id)
      );

      CREATE TABLE spans (
        pk BIGSERIAL PRIMARY KEY,
        rollout_id TEXT NOT NULL,
        attempt_id TEXT NOT NULL,
        sequence_id INTEGER NOT NULL,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        parent_id TEXT,
        name TEXT NOT NULL,
        start_time DOUBLE PRECISION,
        end_time DOUBLE PRECISION,
        data JSONB NOT NULL,                        -- the whole span, unknown keys included
        UNIQUE (rollout_id, attempt_id, span_id)
      );
      CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id);
      CREATE INDEX spans_by_attempt ON spans (rollout_id, attempt_id, sequence_id);

      CREATE TABLE span_sequences (
        rollout_id TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      );

      CREATE TABLE resources (
        pk BIGSERIAL PRIMARY KEY,
        resources_id TEXT NOT NULL UNIQUE,
        resources JSONB NOT NULL,
        create_time DOUBLE PRECISION NOT NULL,
        update_time DOUBLE PRECISION NOT NULL,
        version INTEGER NOT NULL,
        touch_seq BIGINT NOT NULL                   -- the highest is the latest added or updated
      );
      CREATE INDEX resources_latest ON resources (touch_seq);

      CREATE TABLE workers (
        pk BIGSERIAL PRIMARY KEY,
        worker_id TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL,
        heartbeat_stats JSONB,
        last_heartbeat_time DOUBLE PRECISION,
        last_dequeue_time DOUBLE PRECISION,
        last_busy_time DOUBLE PRECISION,
        last_idle_time DOUBLE PRECISION,
        current_rollout_id TEXT,
        current_attempt_id TEXT
      );
    `,
  },
  {
    version: 2,
    name: "rollouts by start_time, newest first",
    // The dashboard's default order. The key repeats orderBySql's ORDER BY for a time field sorted
    // descending (nulls last, ties in insertion order), so the planner reads the first page off the
    // index instead of sorting the whole table.
    sql: `CREATE INDEX rollouts_by_start_time_desc ON rollouts ((start_time IS NULL), start_time DESC, pk);`,
  },
  {
    version: 3,
    name: "span ingest in one statement",
    // Spans of attempts whose activity is a heartbeat (and, for a first span, preparing -> running of
    // the attempt and its rollout) are stored, given their sequence ids, and recorded as activity by
    // one call: one round trip and one commit per group-committed span batch instead of BEGIN, lock,
    // read, insert, write, COMMIT. The rules mirror @agl/core's statusesAfterActivity and
    // nextWatchdogDeadline for exactly the cases admitted by "ok"; for any other target (missing,
    // not the latest attempt, a worker to mark busy, a requeuing rollout, both kinds of ids in one
    // rollout) it writes nothing and answers one row of NULLs, and the store runs its general
    // transaction. A function, not one statement: the lock must come first, and the reads after it
    // need a snapshot taken once it is held (see readLatestAttempts in pg-db.ts). 1073741824 is
    // MAX_SPAN_SEQUENCE_ID (2^30), where the counter saturates as in pg-spans.ts.
    sql: `CREATE FUNCTION agl_ingest_spans(p_rid text[], p_aid text[], p_seq int[], p_tid text[], p_sid text[],
        p_pid text[], p_name text[], p_st float8[], p_et float8[], p_data text[], p_assign bool[], p_now float8)
      RETURNS TABLE (o_rid text, o_aid text, o_sid text, o_seq int, o_deadline float8)
      LANGUAGE plpgsql AS $fn$
      BEGIN
        PERFORM 1 FROM rollouts r WHERE r.rollout_id = ANY(p_rid) ORDER BY r.rollout_id FOR UPDATE;
        RETURN QUERY
        WITH t AS (
          SELECT * FROM unnest(p_rid, p_aid, p_seq, p_tid, p_sid, p_pid, p_name, p_st, p_et, p_data, p_assign)
            WITH ORDINALITY AS t(rid, aid, seq, tid, sid, pid, name, st, et, data, assign, ord)
        ), targets AS (
          SELECT DISTINCT rid, aid FROM t
        ), ok AS (
          SELECT COALESCE(bool_and(r.rollout_id IS NOT NULL AND a.attempt_id IS NOT NULL
              AND a.sequence_id = r.attempt_count AND r.status <> 'requeuing'
              AND (a.status = 'running' OR (a.status = 'preparing' AND a.worker_id IS NULL))), false)
            AND NOT EXISTS (SELECT 1 FROM t GROUP BY rid HAVING bool_or(assign) AND NOT bool_and(assign)) AS ok
          FROM targets LEFT JOIN rollouts r ON r.rollout_id = targets.rid
            LEFT JOIN attempts a ON a.rollout_id = targets.rid AND a.attempt_id = targets.aid
        ), need AS (
          SELECT rid, COUNT(*)::int AS n FROM t WHERE assign AND (SELECT ok FROM ok) GROUP BY rid
        ), alloc AS (
          INSERT INTO span_sequences (rollout_id, value) SELECT rid, n FROM need
          ON CONFLICT (rollout_id) DO UPDATE SET value = LEAST(span_sequences.value, 1073741824) + EXCLUDED.value
          RETURNING rollout_id, value
        ), numbered AS (
          SELECT t.*, CASE WHEN t.assign THEN LEAST(
              al.value - need.n + ROW_NUMBER() OVER (PARTITION BY t.rid, t.assign ORDER BY t.ord), 1073741824)
            ELSE t.seq END AS given
          FROM t LEFT JOIN need ON need.rid = t.rid LEFT JOIN alloc al ON al.rollout_id = t.rid
          WHERE (SELECT ok FROM ok)
        ), ins AS (
          INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time, end_time, data)
          SELECT rid, aid, given, tid, sid, pid, name, st, et,
            CASE WHEN assign THEN jsonb_set(data::jsonb, '{sequence_id}', to_jsonb(given)) ELSE data::jsonb END
          FROM numbered ORDER BY ord
          ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
          RETURNING rollout_id, attempt_id, span_id, sequence_id
        ), bump AS (
          INSERT INTO span_sequences (rollout_id, value)
          SELECT i.rollout_id, MAX(i.sequence_id) FROM ins i WHERE i.rollout_id NOT IN (SELECT rid FROM need)
          GROUP BY i.rollout_id
          ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(span_sequences.value, EXCLUDED.value)
        ), touched AS (
          SELECT DISTINCT i.rollout_id AS rid, i.attempt_id AS aid FROM ins i
        ), a_upd AS (
          UPDATE attempts a SET last_heartbeat_time = p_now, status = 'running', end_time = NULL
          FROM touched WHERE a.rollout_id = touched.rid AND a.attempt_id = touched.aid
          RETURNING a.rollout_id, a.start_time
        ), dl AS (
          SELECT r.rollout_id, r.status AS old_status, r.deadline AS old_deadline, nx.status,
            CASE WHEN nx.status IN ('preparing', 'running') THEN LEAST(
              au.start_time + (r.config->>'timeout_seconds')::float8,
              p_now + (r.config->>'unresponsive_seconds')::float8) END AS deadline
          FROM a_upd au JOIN rollouts r ON r.rollout_id = au.rollout_id
            CROSS JOIN LATERAL (SELECT CASE WHEN r.status = 'preparing' THEN 'running' ELSE r.status END AS status) nx
        ), r_upd AS (
          UPDATE rollouts r SET status = dl.status,
            end_time = CASE WHEN dl.status <> dl.old_status THEN NULL ELSE r.end_time END,
            deadline = dl.deadline
          FROM dl WHERE r.rollout_id = dl.rollout_id
            AND (dl.status <> dl.old_status OR dl.deadline IS DISTINCT FROM dl.old_deadline)
          RETURNING 1
        )
        SELECT i.rollout_id, i.attempt_id, i.span_id, i.sequence_id, dl.deadline
          FROM ins i LEFT JOIN dl ON dl.rollout_id = i.rollout_id
        UNION ALL
        SELECT NULL, NULL, NULL, NULL, NULL WHERE NOT (SELECT ok FROM ok);
      END
      $fn$;`,
  },
  {
    version: 4,
    name: "span ingest for one attempt",
    // The common batch, spans of one attempt all with or all without their sequence ids (an OTLP
    // export, one add_span), with the rules of agl_ingest_spans (version 3) for that case in plain
    // statements on one row each: a profile put most of version 3's CPU in starting and planning its
    // thirteen-CTE statement, which this shape does not need. The spans come as one JSON array
    // (parsed once, no array literal to escape). Same answer as version 3: a row per span stored, or
    // one row of NULLs, with nothing written, when the target is not covered.
    sql: `CREATE FUNCTION agl_ingest_attempt_spans(p_rid text, p_aid text, p_assign bool, p_seq int[],
        p_tid text[], p_sid text[], p_pid text[], p_name text[], p_st float8[], p_et float8[], p_data jsonb,
        p_now float8)
      RETURNS TABLE (o_rid text, o_aid text, o_sid text, o_seq int, o_deadline float8)
      LANGUAGE plpgsql AS $fn$
      DECLARE
        v_n int := cardinality(p_sid);
        r_status text; r_count int; r_config jsonb; r_deadline float8;
        a_seq int; a_status text; a_worker text; a_start float8;
        v_last int; v_status text; v_deadline float8; v_stored int;
      BEGIN
        SELECT r.status, r.attempt_count, r.config, r.deadline INTO r_status, r_count, r_config, r_deadline
          FROM rollouts r WHERE r.rollout_id = p_rid FOR UPDATE;
        IF FOUND THEN
          -- A statement of its own: its snapshot is taken once the lock is held.
          SELECT a.sequence_id, a.status, a.worker_id, a.start_time INTO a_seq, a_status, a_worker, a_start
            FROM attempts a WHERE a.rollout_id = p_rid AND a.attempt_id = p_aid;
        END IF;
        IF NOT FOUND OR a_seq <> r_count OR r_status = 'requeuing'
            OR NOT (a_status = 'running' OR (a_status = 'preparing' AND a_worker IS NULL)) THEN
          RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::int, NULL::float8;
          RETURN;
        END IF;
        IF p_assign THEN
          INSERT INTO span_sequences AS s (rollout_id, value) VALUES (p_rid, v_n)
            ON CONFLICT (rollout_id) DO UPDATE SET value = LEAST(s.value, 1073741824) + EXCLUDED.value
            RETURNING s.value INTO v_last;
        END IF;
        v_status := CASE WHEN r_status = 'preparing' THEN 'running' ELSE r_status END;
        v_deadline := CASE WHEN v_status IN ('preparing', 'running') THEN LEAST(
          a_start + (r_config->>'timeout_seconds')::float8, p_now + (r_config->>'unresponsive_seconds')::float8) END;
        RETURN QUERY
        WITH ins AS (
          INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time,
            end_time, data)
          SELECT p_rid, p_aid, g.given, g.tid, g.sid, g.pid, g.name, g.st, g.et,
            CASE WHEN p_assign THEN jsonb_set(p_data -> (g.ord::int - 1), '{sequence_id}', to_jsonb(g.given))
              ELSE p_data -> (g.ord::int - 1) END
          FROM (SELECT t.*, CASE WHEN p_assign THEN LEAST(v_last - v_n + t.ord::int, 1073741824) ELSE t.seq END AS given
            FROM unnest(p_seq, p_tid, p_sid, p_pid, p_name, p_st, p_et) WITH ORDINALITY
              AS t(seq, tid, sid, pid, name, st, et, ord)) g
          ORDER BY g.ord
          ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
          RETURNING spans.span_id, spans.sequence_id
        ), bump AS (
          INSERT INTO span_sequences AS s (rollout_id, value)
          SELECT p_rid, MAX(i.sequence_id) FROM ins i WHERE NOT p_assign HAVING COUNT(*) > 0
          ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(s.value, EXCLUDED.value)
        )
        SELECT p_rid, p_aid, i.span_id, i.sequence_id, v_deadline FROM ins i;
        GET DIAGNOSTICS v_stored = ROW_COUNT;
        IF v_stored = 0 THEN
          RETURN;
        END IF;
        UPDATE attempts a SET last_heartbeat_time = p_now, status = 'running', end_time = NULL
          WHERE a.rollout_id = p_rid AND a.attempt_id = p_aid;
        IF v_status <> r_status OR v_deadline IS DISTINCT FROM r_deadline THEN
          UPDATE rollouts r SET status = v_status,
            end_time = CASE WHEN v_status <> r_status THEN NULL ELSE r.end_time END, deadline = v_deadline
            WHERE r.rollout_id = p_rid;
        END IF;
      END
      $fn$;`,
  },
  {
    version: 5,
    name: "lock rollouts with their latest attempts in one call",
    // Every general write transaction starts by locking its rollouts and reading their latest
    // attempts: two round trips, because under READ COMMITTED a locking statement that waited for
    // another transaction re-reads only the rows it locks, so an attempt joined to them could predate
    // that transaction (and writing it back would undo it). In a function the read is a statement of
    // its own, with a snapshot taken once the locks are held: the same guarantee in one round trip.
    sql: `CREATE FUNCTION agl_lock_rollouts(p_ids text[])
      RETURNS TABLE (rollout_id text, input jsonb, input_absent bool, start_time float8, end_time float8,
        mode text, resources_id text, status text, config jsonb, metadata jsonb, queue_seq bigint,
        deadline float8, attempt_count int, latest json)
      LANGUAGE plpgsql AS $fn$
      #variable_conflict use_column
      BEGIN
        PERFORM 1 FROM rollouts r WHERE r.rollout_id = ANY(p_ids) ORDER BY r.rollout_id FOR UPDATE;
        RETURN QUERY
        SELECT r.rollout_id, r.input, r.input IS NULL, r.start_time, r.end_time, r.mode, r.resources_id, r.status,
          r.config, r.metadata, r.queue_seq, r.deadline, r.attempt_count,
          (SELECT row_to_json(a) FROM attempts a WHERE a.rollout_id = r.rollout_id AND a.sequence_id = r.attempt_count)
        FROM rollouts r WHERE r.rollout_id = ANY(p_ids) ORDER BY r.rollout_id;
      END
      $fn$;`,
  },
  {
    version: 6,
    name: "one span in one call",
    // The single span of an OTLP export from OtelTracer or of one add_span, the commonest write, with
    // agl_ingest_attempt_spans's rules (version 4) for one span: scalar arguments (no arrays to parse,
    // no JSON array to index), a counter that exists moved by a plain UPDATE (an upsert's speculative
    // insert is dearer), one-row statements, and one row returned through OUT arguments (a set
    // returning function materialises its rows first). plpgsql, not a SQL function: its plans are
    // cached for the session, and the attempt is read by a statement of its own once the lock is held.
    // o_covered false: nothing written, the store runs its general transaction; o_seq NULL: the span
    // was already stored (nothing written either).
    sql: `CREATE FUNCTION agl_ingest_one_span(p_rid text, p_aid text, p_assign bool, p_seq int, p_tid text,
        p_sid text, p_pid text, p_name text, p_st float8, p_et float8, p_data jsonb, p_now float8,
        OUT o_covered bool, OUT o_seq int, OUT o_deadline float8)
      LANGUAGE plpgsql AS $fn$
      DECLARE
        r_status text; r_count int; r_config jsonb; r_deadline float8;
        a_seq int; a_status text; a_worker text; a_start float8;
        v_status text;
      BEGIN
        SELECT r.status, r.attempt_count, r.config, r.deadline INTO r_status, r_count, r_config, r_deadline
          FROM rollouts r WHERE r.rollout_id = p_rid FOR UPDATE;
        IF FOUND THEN
          -- A statement of its own: its snapshot is taken once the lock is held.
          SELECT a.sequence_id, a.status, a.worker_id, a.start_time INTO a_seq, a_status, a_worker, a_start
            FROM attempts a WHERE a.rollout_id = p_rid AND a.attempt_id = p_aid;
        END IF;
        o_covered := COALESCE(FOUND AND a_seq = r_count AND r_status <> 'requeuing'
          AND (a_status = 'running' OR (a_status = 'preparing' AND a_worker IS NULL)), false);
        IF NOT o_covered THEN
          RETURN;
        END IF;
        IF p_assign THEN
          UPDATE span_sequences s SET value = LEAST(s.value, 1073741824) + 1 WHERE s.rollout_id = p_rid
            RETURNING s.value INTO p_seq;
          IF NOT FOUND THEN
            INSERT INTO span_sequences AS s (rollout_id, value) VALUES (p_rid, 1)
              ON CONFLICT (rollout_id) DO UPDATE SET value = LEAST(s.value, 1073741824) + 1
              RETURNING s.value INTO p_seq;
          END IF;
          p_seq := LEAST(p_seq, 1073741824);
          p_data := jsonb_set(p_data, '{sequence_id}', to_jsonb(p_seq));
        END IF;
        INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time,
            end_time, data)
          VALUES (p_rid, p_aid, p_seq, p_tid, p_sid, p_pid, p_name, p_st, p_et, p_data)
          ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
          RETURNING spans.sequence_id INTO o_seq;
        IF o_seq IS NULL THEN
          RETURN;
        END IF;
        IF NOT p_assign THEN
          INSERT INTO span_sequences AS s (rollout_id, value) VALUES (p_rid, o_seq)
            ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(s.value, EXCLUDED.value);
        END IF;
        v_status := CASE WHEN r_status = 'preparing' THEN 'running' ELSE r_status END;
        o_deadline := CASE WHEN v_status IN ('preparing', 'running') THEN LEAST(
          a_start + (r_config->>'timeout_seconds')::float8, p_now + (r_config->>'unresponsive_seconds')::float8) END;
        UPDATE attempts a SET last_heartbeat_time = p_now, status = 'running', end_time = NULL
          WHERE a.rollout_id = p_rid AND a.attempt_id = p_aid;
        IF v_status <> r_status OR o_deadline IS DISTINCT FROM r_deadline THEN
          UPDATE rollouts r SET status = v_status,
            end_time = CASE WHEN v_status <> r_status THEN NULL ELSE r.end_time END, deadline = o_deadline
            WHERE r.rollout_id = p_rid;
        END IF;
      END
      $fn$;`,
  },
];

/** Apply the missing migrations in the client's current schema (search_path). */
export async function migratePostgres(
  client: pg.ClientBase,
  migrations: readonly PgMigration[] = POSTGRES_MIGRATIONS,
): Promise<number[]> {
  const applied: number[] = [];
  await client.query("BEGIN");
  try {
    // One migrator per database at a time; the lock is released at COMMIT/ROLLBACK.
    await client.query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':agl-migrations'))");
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY,
      name TEXT NOT NULL,
      applied_at DOUBLE PRECISION NOT NULL
    )`);
    const done = new Set(
      (await client.query<{ version: number }>("SELECT version FROM schema_migrations")).rows.map(
        (r) => r.version,
      ),
    );
    for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
      if (done.has(migration.version)) continue;
      await client.query(migration.sql);
      await client.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)", [
        migration.version,
        migration.name,
        Date.now() / 1000,
      ]);
      applied.push(migration.version);
    }
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => {});
    throw error;
  }
  return applied;
}
