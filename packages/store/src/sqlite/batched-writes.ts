/**
 * Group commit for the SQLite store: the writes requested in one turn of the event loop (the
 * requests of many connections that arrived together) run in ONE IMMEDIATE transaction, each in a
 * savepoint of its own, so N concurrent requests cost one BEGIN/COMMIT and one WAL append of each
 * page they touch instead of N. The commit, not the statements, is most of a small write's cost.
 *
 * - A write that throws rolls back to its savepoint and fails alone; the others commit.
 * - Writes run in the order they were asked for, so each sees the ones before it.
 * - Every promise settles only after the transaction holding it has committed (or failed), and the
 *   `after` callback (publishing waiters and deadlines) runs only for writes that committed.
 * - No timer: a batch runs at the next setImmediate, so a lone write waits one loop turn and no
 *   longer. The batch itself is synchronous, so no read of the same connection ever sees a batch
 *   half done.
 */
import type Database from "better-sqlite3";

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

  constructor(private readonly db: Database.Database) {}

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
      for (const [job, outcome] of this.commit(jobs)) {
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

  private commit(jobs: Job[]): Array<[Job, Outcome]> {
    const outcomes: Outcome[] = [];
    try {
      this.db
        .transaction(() => {
          for (const job of jobs) {
            try {
              // A transaction function called inside another runs as a SAVEPOINT (better-sqlite3).
              outcomes.push({ ok: true, value: this.db.transaction(job.run)() });
            } catch (error) {
              outcomes.push({ ok: false, error });
            }
          }
        })
        .immediate();
    } catch (error) {
      // BEGIN or COMMIT failed (the file is busy, the disk is full): nothing of the batch is stored.
      return jobs.map((job) => [job, { ok: false, error }]);
    }
    return jobs.map((job, i) => [job, outcomes[i]!]);
  }
}
