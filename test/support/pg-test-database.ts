/**
 * The set-up the PostgreSQL store's own tests share: a fresh database for the test file (created in
 * beforeAll, dropped in afterAll), an admin connection to inspect rows with, a unique schema name per
 * store, and a count of the statements and transactions the store's connections run.
 */
import type { SpanInput } from "@agl/core";
import pg from "pg";
import { afterAll, beforeAll, vi } from "vitest";
import { createTestDatabase } from "./postgres.js";

export interface PgTestDatabase {
  url: () => string;
  /** A connection of the test's own (countStatements leaves it out). */
  admin: () => pg.Client;
  /** A schema name not used before in this process, starting with `prefix`. */
  schema: () => string;
}

export function usePgTestDatabase(prefix: string): PgTestDatabase {
  let db: { url: string; drop: () => Promise<void> } | undefined;
  let admin: pg.Client | undefined;
  let counter = 0;
  beforeAll(async () => {
    db = await createTestDatabase();
    admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    await admin?.end();
    await db?.drop();
  });
  return {
    url: () => db!.url,
    admin: () => admin!,
    schema: () => `${prefix}${process.pid}_${counter++}`,
  };
}

/**
 * From now on, the statements run by every pg client but `except`, and the transactions among them
 * (a BEGIN…COMMIT block counts once, a statement outside one counts on its own).
 */
export function countStatements(except: pg.Client): {
  statements: () => number;
  transactions: () => number;
  stop: () => void;
} {
  const open = new WeakSet<object>();
  let transactions = 0;
  let statements = 0;
  const original = pg.Client.prototype.query;
  const spy = vi.spyOn(pg.Client.prototype, "query").mockImplementation(function (
    this: pg.Client,
    ...args: unknown[]
  ) {
    const first = args[0];
    const text = typeof first === "string" ? first : (first as { text?: string }).text;
    if (this !== except) {
      statements++;
      if (text === "BEGIN") {
        open.add(this);
        transactions++;
      } else if (text === "COMMIT" || text === "ROLLBACK") open.delete(this);
      else if (!open.has(this)) transactions++;
    }
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original);
  return { statements: () => statements, transactions: () => transactions, stop: () => spy.mockRestore() };
}

/** A minimal span of an attempt (sequence id `seq`, span id `id`) for the store tests. */
export const testSpan = (rid: string, aid: string, id: string, seq = 1): SpanInput => ({
  rollout_id: rid,
  attempt_id: aid,
  sequence_id: seq,
  trace_id: "ab".repeat(16),
  span_id: id,
  name: "work",
});
