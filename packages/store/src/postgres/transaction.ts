/** Transactions on a pg Pool, retried when PostgreSQL aborts one to break a deadlock or a serialization conflict. */
import type pg from "pg";

const RETRYABLE = new Set(["40P01", "40001"]);
const MAX_ATTEMPTS = 5;

/**
 * Run `fn` in a transaction on a pooled connection. With `begin: false`, `fn` runs one statement,
 * which PostgreSQL runs as a transaction of its own (atomic, committed before it answers): the same
 * guarantees without the BEGIN and COMMIT round trips.
 */
export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
  options: { begin?: boolean } = {},
): Promise<T> {
  const begin = options.begin ?? true;
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken = false;
    try {
      if (begin) await client.query("BEGIN");
      const result = await fn(client);
      if (begin) await client.query("COMMIT");
      return result;
    } catch (error) {
      if (begin)
        await client.query("ROLLBACK").catch(() => {
          broken = true;
        });
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
