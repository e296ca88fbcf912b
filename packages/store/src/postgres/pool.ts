/** Opening the PostgreSQL pool of a store: the schema (created if missing) on the search path, migrated. */
import pg from "pg";
import { migratePostgres } from "./migrations.js";

/** A pool whose connections use `schema`, after creating and migrating it; the pool is ended on failure. */
export async function openMigratedPool(url: string, schema: string, poolSize: number): Promise<pg.Pool> {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    options: `-c search_path=${schema}`,
    // A statement is sent without waiting for the previous one's answer, so BEGIN and COMMIT ride
    // with a transaction's first and last statements (transaction.ts). Statements are still
    // answered in order, and each is its own protocol message group: an error fails only its own
    // (and, inside a transaction, PostgreSQL refuses the ones after it until ROLLBACK).
    pipeline: true,
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on("error", (error) => console.error("[agl-store] idle postgres client error:", error.message));
  try {
    const client = await pool.connect();
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`).catch((error) => {
        // Concurrent creators race on the catalog; the schema exists either way.
        if ((error as { code?: string }).code !== "23505") throw error;
      });
      await migratePostgres(client);
    } finally {
      client.release();
    }
  } catch (error) {
    await pool.end();
    throw error;
  }
  return pool;
}
