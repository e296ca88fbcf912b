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
