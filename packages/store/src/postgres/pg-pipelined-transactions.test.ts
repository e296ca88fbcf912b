/**
 * Pipelined transactions on the store's pool: BEGIN goes out with a transaction's first statement
 * and, for a group-committed write, COMMIT with its persisting statement, so an update_attempt takes
 * two round trips instead of four. What is sent and answered is observed on the pool's connections
 * (a round trip: statements sent before the next answer arrives). A COMMIT sent behind a statement
 * that fails commits nothing, and a deadlocked transaction is still retried whole.
 */
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { testSpan, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { openMigratedPool } from "./pool.js";
import { PostgresLightningStore } from "./postgres-store.js";
import { withTransaction } from "./transaction.js";

const pgdb = usePgTestDatabase("pipe");
let admin: pg.Client;
beforeAll(() => {
  admin = pgdb.admin();
});

interface Wire {
  /** "S" for each statement sent (a simple query or an extended-protocol Sync), "R" for each answer. */
  events: string[];
}

/** Record sends and answers on every connection `pool` hands out from now on. */
function observe(pool: pg.Pool): Wire {
  const wire: Wire = { events: [] };
  const hooked = new WeakSet<object>();
  pool.on("acquire", (client) => {
    const connection = (client as unknown as { connection: Record<string, unknown> & NodeJS.EventEmitter })
      .connection;
    if (hooked.has(connection)) return;
    hooked.add(connection);
    for (const method of ["query", "sync"]) {
      const original = connection[method] as (...args: unknown[]) => unknown;
      connection[method] = (...args: unknown[]) => {
        wire.events.push("S");
        return original.apply(connection, args);
      };
    }
    connection.on("readyForQuery", () => wire.events.push("R"));
  });
  return wire;
}

/** Round trips: groups of statements sent before the next answer. */
const roundTrips = (events: readonly string[]): number =>
  events.filter((e, i) => e === "S" && (i === 0 || events[i - 1] === "R")).length;

const poolOf = (store: PostgresLightningStore): pg.Pool => (store as unknown as { pool: pg.Pool }).pool;

describe("PostgreSQL: pipelined transactions", () => {
  let store: PostgresLightningStore;
  beforeAll(async () => {
    const options = { schema: pgdb.schema(), poolSize: 2, watchdog: false, listen: false };
    store = await PostgresLightningStore.connect(pgdb.url(), options);
  });
  afterAll(() => store.close());

  it("an attempt update is two round trips: BEGIN with the lock, COMMIT with the persisting statement", async () => {
    const r = await store.startRollout({ input: 1 });
    await store.addSpan(testSpan(r.rollout_id, r.attempt.attempt_id, "s1"));
    const wire = observe(poolOf(store));
    const attempt = await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
    expect(attempt.status).toBe("succeeded");
    // BEGIN, agl_lock_rollouts, the persisting statement, COMMIT: four statements, answered in order.
    expect(wire.events).toEqual(["S", "S", "R", "R", "S", "S", "R", "R"]);
    expect(roundTrips(wire.events)).toBe(2);
    const { rows } = await admin.query(
      `SELECT r.status, a.status AS attempt_status FROM ${(store as { schema: string }).schema}.rollouts r
       JOIN ${(store as { schema: string }).schema}.attempts a USING (rollout_id) WHERE r.rollout_id = $1`,
      [r.rollout_id],
    );
    expect(rows).toEqual([{ status: "succeeded", attempt_status: "succeeded" }]);
  });

  it("a refused update (a second success) still rolls back and leaves the store as it was", async () => {
    const r = await store.startRollout({ input: 2 });
    await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
    const before = await store.getRolloutById(r.rollout_id);
    await expect(
      store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "running" }),
    ).rejects.toThrow();
    expect(await store.getRolloutById(r.rollout_id)).toEqual(before);
    // The connection is usable afterwards (no transaction left open on it).
    const next = await store.startRollout({ input: 3 });
    expect(next.status).toBe("preparing");
  });
});

describe("withTransaction on a pipelined pool", () => {
  let pool: pg.Pool;
  let table: string;
  beforeAll(async () => {
    const schema = pgdb.schema();
    pool = await openMigratedPool(pgdb.url(), schema, 2);
    table = `${schema}.pipelined_rows`;
    await pool.query(`CREATE TABLE ${table} (v int PRIMARY KEY)`);
  });
  afterAll(() => pool.end());
  const count = async () => Number((await admin.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n);

  it("COMMIT sent behind the last statement commits the transaction, in one round trip less", async () => {
    const wire = observe(pool);
    await withTransaction(pool, async (c, tx) => {
      await c.query(`INSERT INTO ${table} VALUES (1)`);
      const last = c.query(`INSERT INTO ${table} VALUES (2)`);
      tx.commitNow();
      await last;
    });
    expect(roundTrips(wire.events)).toBe(2);
    expect(await count()).toBe(2);
  });

  it("COMMIT sent behind a statement that fails commits nothing, and the error reaches the caller", async () => {
    const n = await count();
    await expect(
      withTransaction(pool, async (c, tx) => {
        await c.query(`INSERT INTO ${table} VALUES (10)`);
        const last = c.query("SELECT 1 / 0");
        tx.commitNow();
        await last;
      }),
    ).rejects.toMatchObject({ code: "22012" });
    expect(await count()).toBe(n);
    // The pooled connection is clean: a new transaction on it commits.
    await withTransaction(pool, async (c) => {
      await c.query(`INSERT INTO ${table} VALUES (11)`);
    });
    expect(await count()).toBe(n + 1);
  });

  it("an error before any statement leaves nothing open; a thrown error after BEGIN rolls back", async () => {
    const n = await count();
    await expect(
      withTransaction(pool, async (c) => {
        await c.query(`INSERT INTO ${table} VALUES (20)`);
        throw new Error("refused by the caller");
      }),
    ).rejects.toThrow("refused by the caller");
    expect(await count()).toBe(n);
  });

  it("a deadlock victim is retried whole and both transactions end committed", async () => {
    await pool.query(`INSERT INTO ${table} VALUES (100), (200)`);
    let holding = 0;
    let attempts = 0;
    let release: () => void = () => {};
    const bothHold = new Promise<void>((resolve) => {
      release = resolve;
    });
    const cross = (first: number, second: number) =>
      withTransaction(pool, async (c, tx) => {
        attempts++;
        await c.query(`UPDATE ${table} SET v = v WHERE v = ${first}`);
        // Only the first attempt of each waits for the other: a retry runs straight through.
        if (holding < 2 && ++holding === 2) release();
        if (holding <= 2) await bothHold;
        const last = c.query(`UPDATE ${table} SET v = v WHERE v = ${second}`);
        tx.commitNow();
        await last;
      });
    // Without the retry, the victim's 40P01 would reject here.
    await Promise.all([cross(100, 200), cross(200, 100)]);
    expect(attempts).toBe(3);
  });
});
