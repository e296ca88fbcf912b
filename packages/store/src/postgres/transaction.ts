/** Transactions on a pg Pool, retried when PostgreSQL aborts one to break a deadlock or a serialization conflict. */
import type pg from "pg";

const RETRYABLE = new Set(["40P01", "40001"]);
const MAX_ATTEMPTS = 5;

/** What `fn` can do with its transaction besides running statements. */
export interface TransactionControl {
  /**
   * Send COMMIT right behind the statement `fn` has just issued (pipelined: no round trip of its
   * own), for a statement that is the transaction's last. If that statement fails, PostgreSQL
   * answers the COMMIT of the aborted transaction with a rollback, so nothing is committed; `fn`
   * still sees the statement's error. withTransaction then sends no COMMIT of its own.
   */
  commitNow(): void;
}

/** Whether the pool's connections send a statement before the previous one is answered. */
const pipelined = (client: pg.PoolClient): boolean => (client as { pipeline?: boolean }).pipeline === true;

/**
 * Run `fn` in a transaction on a pooled connection. With `begin: false`, `fn` runs one statement,
 * which PostgreSQL runs as a transaction of its own (atomic, committed before it answers): the same
 * guarantees without the BEGIN and COMMIT round trips. On a pipelined connection (openMigratedPool's),
 * BEGIN goes out with `fn`'s first statement, and COMMIT with its last when `fn` calls commitNow():
 * a transaction of n statements takes n round trips instead of n + 2.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient, tx: TransactionControl) => Promise<T>,
  options: { begin?: boolean } = {},
): Promise<T> {
  const begin = options.begin ?? true;
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken = false;
    let committing: Promise<unknown> | null = null;
    try {
      let began: Promise<unknown> | null = null;
      if (begin) {
        began = client.query("BEGIN");
        // Awaited below; an error meanwhile must not surface as an unhandled rejection.
        began.catch(() => undefined);
        if (!pipelined(client)) await began;
      }
      const tx: TransactionControl = {
        commitNow: () => {
          if (!begin || committing || !pipelined(client)) return;
          committing = client.query("COMMIT");
          committing.catch(() => undefined);
        },
      };
      const result = await fn(client, tx);
      await began;
      if (begin) await (committing ?? client.query("COMMIT"));
      return result;
    } catch (error) {
      if (begin) {
        // A pipelined COMMIT must be answered before ROLLBACK is sent (it is, in order); a COMMIT
        // that failed leaves nothing to roll back, and ROLLBACK then only warns.
        await (committing as Promise<unknown> | null)?.catch(() => undefined);
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
      }
      // Without a transaction to roll back, a connection that failed (no SQLSTATE) is dropped too.
      else broken = !/^[0-9A-Z]{5}$/.test(String((error as { code?: unknown }).code));
      const code = (error as { code?: string }).code;
      if (!(code && RETRYABLE.has(code) && attempt < MAX_ATTEMPTS)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt * Math.random()));
    } finally {
      // A client whose ROLLBACK failed is in an unknown state: drop it from the pool.
      client.release(broken);
    }
  }
}
