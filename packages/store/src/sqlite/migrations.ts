/**
 * Versioned schema of the SQLite store. Each migration runs once, in its own transaction, and is
 * recorded in `schema_migrations`; reopening a file applies only the missing ones. Append new
 * migrations; never edit a released one.
 */
import type { Database } from "better-sqlite3";

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export const SQLITE_MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "initial schema",
    sql: `
      CREATE TABLE rollouts (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,        -- insertion order
        rollout_id TEXT NOT NULL UNIQUE,
        input TEXT,                                  -- JSON; NULL = no input given
        start_time REAL NOT NULL,
        end_time REAL,
        mode TEXT,
        resources_id TEXT,
        status TEXT NOT NULL,
        config TEXT NOT NULL,                        -- JSON
        metadata TEXT NOT NULL,                      -- JSON (may be the JSON null)
        queue_seq INTEGER,                           -- FIFO position; NULL = not in the queue
        deadline REAL,                               -- next watchdog deadline; NULL = none
        attempt_count INTEGER NOT NULL DEFAULT 0     -- = sequence_id of the latest attempt
      );
      -- The queue: entries in enqueue order (status is checked when an entry is popped).
      CREATE INDEX rollouts_queue ON rollouts (queue_seq, status) WHERE queue_seq IS NOT NULL;
      CREATE INDEX rollouts_status ON rollouts (status, pk);
      CREATE INDEX rollouts_deadline ON rollouts (deadline) WHERE deadline IS NOT NULL;

      CREATE TABLE attempts (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,
        rollout_id TEXT NOT NULL,
        attempt_id TEXT NOT NULL,
        sequence_id INTEGER NOT NULL,
        start_time REAL NOT NULL,
        end_time REAL,
        status TEXT NOT NULL,
        worker_id TEXT,
        last_heartbeat_time REAL,
        metadata TEXT NOT NULL,
        UNIQUE (rollout_id, attempt_id),
        UNIQUE (rollout_id, sequence_id)
      );

      CREATE TABLE spans (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,
        rollout_id TEXT NOT NULL,
        attempt_id TEXT NOT NULL,
        sequence_id INTEGER NOT NULL,
        trace_id TEXT NOT NULL,
        span_id TEXT NOT NULL,
        parent_id TEXT,
        name TEXT NOT NULL,
        start_time REAL,
        end_time REAL,
        data TEXT NOT NULL,                          -- the whole span as JSON, unknown keys included
        UNIQUE (rollout_id, attempt_id, span_id)
      );
      CREATE INDEX spans_by_sequence ON spans (rollout_id, sequence_id);
      CREATE INDEX spans_by_attempt ON spans (rollout_id, attempt_id, sequence_id);

      CREATE TABLE span_sequences (
        rollout_id TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      ) WITHOUT ROWID;

      CREATE TABLE resources (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,
        resources_id TEXT NOT NULL UNIQUE,
        resources TEXT NOT NULL,
        create_time REAL NOT NULL,
        update_time REAL NOT NULL,
        version INTEGER NOT NULL,
        touch_seq INTEGER NOT NULL                   -- the highest is the latest added or updated
      );
      CREATE INDEX resources_latest ON resources (touch_seq);

      CREATE TABLE workers (
        pk INTEGER PRIMARY KEY AUTOINCREMENT,
        worker_id TEXT NOT NULL UNIQUE,
        status TEXT NOT NULL,
        heartbeat_stats TEXT,
        last_heartbeat_time REAL,
        last_dequeue_time REAL,
        last_busy_time REAL,
        last_idle_time REAL,
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

/** Apply the migrations that `db` has not seen yet. Safe to run from several processes at once. */
export function migrateSqlite(db: Database, migrations: readonly Migration[] = SQLITE_MIGRATIONS): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at REAL NOT NULL
  )`);
  const applied: number[] = [];
  const has = db.prepare("SELECT 1 FROM schema_migrations WHERE version = ?");
  const record = db.prepare("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)");
  for (const migration of [...migrations].sort((a, b) => a.version - b.version)) {
    // IMMEDIATE takes the write lock first, so two processes opening a new file cannot both migrate.
    db.transaction(() => {
      if (has.get(migration.version)) return;
      db.exec(migration.sql);
      record.run(migration.version, migration.name, Date.now() / 1000);
      applied.push(migration.version);
    }).immediate();
  }
  return applied;
}
