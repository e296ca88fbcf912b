/** Transactions on a pg Pool, retried when PostgreSQL aborts one to break a deadlock or a serialization conflict. */
import type pg from "pg";

const RETRYABLE = new Set(["40P01", "40001"]);
const MAX_ATTEMPTS = 5;

export async function withTransaction<T>(
  pool: pg.Pool,
  fn: (client: pg.PoolClient) => Promise<T>,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken = false;
    try {
      await client.query("BEGIN");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {
        broken = true;
      });
      const code = (error as { code?: string }).code;
      if (!(code && RETRYABLE.has(code) && attempt < MAX_ATTEMPTS)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt * Math.random()));
    } finally {
      // A client whose ROLLBACK failed is in an unknown state: drop it from the pool.
      client.release(broken);
    }
  }
}
