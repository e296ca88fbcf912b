/**
 * Group commit for the SQLite store: the writes requested in one turn of the event loop (the
 * requests of many connections that arrived together) run in ONE IMMEDIATE transaction, each in a
 * savepoint of its own (a lone write needs none), so N concurrent requests cost one BEGIN/COMMIT and one WAL append of each
 * page they touch instead of N. The commit, not the statements, is most of a small write's cost.
 *
 * - A write that throws rolls back to its savepoint and fails alone; the others commit. A write
 *   that ends the transaction itself fails the whole batch: none of it is stored, nothing runs after.
 * - Writes run in the order they were asked for, so each sees the ones before it.
 * - Every promise settles only after the transaction holding it has committed (or failed), and the
 *   `after` callback (publishing waiters and deadlines) runs only for writes that committed.
 * - No timer: a batch runs at the next setImmediate, so a lone write waits one loop turn and no
 *   longer. The batch itself is synchronous, so no read of the same connection ever sees a batch
 *   half done.
 */
import type Database from "better-sqlite3";
import type { Statement } from "better-sqlite3";

interface Job {
  run: () => unknown;
  after: (value: unknown) => void;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: unknown };

/** Writes per transaction at most; the rest go into the next batch. */
const MAX_BATCH = 256;

export class BatchedWrites {
  private queue: Job[] = [];
  private scheduled = false;
  /**
   * The transaction's statements, prepared once. better-sqlite3's `db.transaction(fn)` builds five
   * wrapper functions and their properties on every call: with a savepoint per write that was ~8%
   * of the SQLite store's CPU per rollout.
   */
  private readonly sql: Record<"begin" | "commit" | "rollback" | "savepoint" | "release" | "undo", Statement>;

  constructor(private readonly db: Database.Database) {
    const p = (text: string) => db.prepare(text);
    this.sql = {
      begin: p("BEGIN IMMEDIATE"),
      commit: p("COMMIT"),
      rollback: p("ROLLBACK"),
      savepoint: p("SAVEPOINT agl_write"),
      release: p("RELEASE agl_write"),
      undo: p("ROLLBACK TO agl_write"),
    };
  }

  /** Run `fn` in the next batch's transaction; `after(value)` once it has committed. */
  run<T>(fn: () => T, after: (value: T) => void = () => {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({
        run: fn,
        after: after as (value: unknown) => void,
        resolve: resolve as (value: unknown) => void,
        reject,
      });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Run every queued write now (also before the database closes). */
  flush(): void {
    this.scheduled = false;
    while (this.queue.length > 0) {
      const jobs = this.queue.splice(0, MAX_BATCH);
      const outcomes = this.commit(jobs);
      for (let i = 0; i < jobs.length; i++) {
        const job = jobs[i]!;
        const outcome = outcomes[i]!;
        if (!outcome.ok) {
          job.reject(outcome.error);
          continue;
        }
        try {
          job.after(outcome.value);
          job.resolve(outcome.value);
        } catch (error) {
          job.reject(error);
        }
      }
    }
  }

  private commit(jobs: Job[]): Outcome[] {
    const { db, sql } = this;
    try {
      sql.begin.run();
    } catch (error) {
      // The file is busy (another process holds the write lock): nothing of the batch is stored.
      return jobs.map(() => ({ ok: false, error }));
    }
    // A lone write needs no savepoint: if it throws, the whole transaction is rolled back instead.
    const alone = jobs.length === 1;
    const outcomes: Outcome[] = [];
    for (const job of jobs) {
      if (!db.inTransaction) {
        // A failure that ended the transaction itself (SQLite rolls back on some errors, e.g. a full
        // disk): nothing of the batch is stored, and no later write may run outside it.
        const cause = outcomes.find((o) => !o.ok) as { error: unknown } | undefined;
        return jobs.map((_, i) => {
          const o = outcomes[i];
          return o && !o.ok ? o : { ok: false, error: cause?.error };
        });
      }
      if (!alone) sql.savepoint.run();
      try {
        const value = job.run();
        if (!alone) sql.release.run();
        outcomes.push({ ok: true, value });
      } catch (error) {
        if (!alone && db.inTransaction) {
          sql.undo.run();
          sql.release.run();
        }
        outcomes.push({ ok: false, error });
      }
    }
    if (alone && !outcomes[0]!.ok) {
      if (db.inTransaction) sql.rollback.run();
      return outcomes;
    }
    try {
      sql.commit.run();
    } catch (error) {
      // COMMIT failed (the disk is full): nothing of the batch is stored.
      if (db.inTransaction) sql.rollback.run();
      return jobs.map(() => ({ ok: false, error }));
    }
    return outcomes;
  }
}
