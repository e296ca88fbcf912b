import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { sharedDbTests } from "../../../../test/support/shared-db-suite.js";
import { openStore } from "../open-store.js";
import { ROLLOUT_COLUMNS } from "../shared/columns.js";
import { orderBySql, postgresDialect } from "../shared/sql-query.js";
import { migratePostgres, POSTGRES_MIGRATIONS } from "./migrations.js";
import { PostgresLightningStore } from "./postgres-store.js";

let db: { url: string; drop: () => Promise<void> };
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

let n = 0;

describe("PostgresLightningStore shared by several instances and processes", () => {
  let schema = "";
  sharedDbTests({
    reset: async () => {
      schema = `shared_${process.pid}_${n++}`;
    },
    open: (options) => PostgresLightningStore.connect(db.url, { ...options, schema, poolSize: 4 }),
    uri: () => db.url,
    env: () => ({ AGL_PG_SCHEMA: schema }),
  });
});

describe("PostgresLightningStore schema", () => {
  it("migrations run once even when several stores connect at the same time, and reopen is idempotent", async () => {
    const schema = `mig_${process.pid}`;
    const stores = await Promise.all(
      [0, 1, 2].map(() => PostgresLightningStore.connect(db.url, { schema, poolSize: 2 })),
    );
    await stores[0]!.enqueueRollout({ input: "kept" });
    await Promise.all(stores.map((s) => s.close()));
    const again = await PostgresLightningStore.connect(db.url, { schema, poolSize: 2 });
    expect((await again.queryRollouts()).items.map((r) => r.input)).toEqual(["kept"]);
    await again.close();
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`SET search_path = ${schema}`);
      expect(await migratePostgres(client)).toEqual([]);
      const { rows } = await client.query("SELECT version FROM schema_migrations ORDER BY version");
      expect(rows.map((r) => r.version)).toEqual(POSTGRES_MIGRATIONS.map((m) => m.version));
      const extra = [
        ...POSTGRES_MIGRATIONS,
        { version: 99, name: "test column", sql: "ALTER TABLE workers ADD COLUMN note TEXT" },
      ];
      expect(await migratePostgres(client, extra)).toEqual([99]);
      expect(await migratePostgres(client, extra)).toEqual([]);
    } finally {
      await client.end();
    }
  });

  it("migration 2 upgrades a version-1 schema; the dashboard's default order can read the index", async () => {
    const schema = `mig2_${process.pid}`;
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
      await client.query(`SET search_path = ${schema}`);
      expect(await migratePostgres(client, POSTGRES_MIGRATIONS.slice(0, 1))).toEqual([1]);
      const store = await PostgresLightningStore.connect(db.url, { schema, poolSize: 2 });
      await store.enqueueManyRollouts(Array.from({ length: 5 }, (_, i) => ({ input: i })));
      expect((await store.queryRollouts({ sortBy: "start_time", sortOrder: "desc", limit: 2 })).total).toBe(
        5,
      );
      await store.close();
      expect(await migratePostgres(client)).toEqual([]);
      const page = { sortBy: "start_time", sortOrder: "desc", limit: 50, offset: 0 } as const;
      const orderBy = orderBySql(page, ROLLOUT_COLUMNS, postgresDialect, "pk");
      // Five rows would be scanned sequentially; turning that off shows whether the index fits the order.
      await client.query("BEGIN");
      await client.query("SET LOCAL enable_seqscan = off");
      const { rows } = await client.query(
        `EXPLAIN SELECT * FROM rollouts r WHERE 1 = 1 ORDER BY ${orderBy} LIMIT 50`,
      );
      await client.query("ROLLBACK");
      const plan = rows.map((r: Record<string, string>) => r["QUERY PLAN"]).join("\n");
      expect(plan).toContain("rollouts_by_start_time_desc");
      expect(plan).not.toContain("Sort");
    } finally {
      await client.end();
    }
  });

  it("batched span inserts store hundreds of spans in one call, duplicates skipped", async () => {
    const store = await PostgresLightningStore.connect(db.url, {
      schema: `spans_${process.pid}`,
      poolSize: 2,
    });
    try {
      const r = await store.startRollout({ input: 1 });
      const spans = Array.from({ length: 500 }, (_, i) => ({
        rollout_id: r.rollout_id,
        attempt_id: r.attempt.attempt_id,
        sequence_id: i + 1,
        trace_id: "a".repeat(32),
        span_id: (i % 400).toString(16).padStart(16, "0"),
        name: `s${i}`,
        attributes: { i, text: "x\\u0000-less 'quoted' \"text\"" },
      }));
      const stored = await store.addManySpans(spans);
      expect(stored).toHaveLength(400);
      expect(stored[399]!.name).toBe("s399");
      expect(
        (await store.querySpans(r.rollout_id, { limit: 1, sortBy: "sequence_id", sortOrder: "desc" }))
          .items[0]!.name,
      ).toBe("s399");
      expect(await store.getNextSpanSequenceId(r.rollout_id, "x")).toBe(401);
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("running");
    } finally {
      await store.close();
    }
  });

  it("openStore connects for postgres:// URIs", async () => {
    const store = await openStore(db.url, { postgres: { schema: `open_${process.pid}`, poolSize: 1 } });
    expect(store).toBeInstanceOf(PostgresLightningStore);
    await store.close();
  });
});
