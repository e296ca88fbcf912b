import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterAll, describe, expect, it } from "vitest";
import { sharedDbTests } from "../../../../test/support/shared-db-suite.js";
import { openStore } from "../open-store.js";
import { ROLLOUT_COLUMNS } from "../shared/columns.js";
import { orderBySql, sqliteDialect } from "../shared/sql-query.js";
import { migrateSqlite, SQLITE_MIGRATIONS } from "./migrations.js";
import { SqliteLightningStore } from "./sqlite-store.js";

const dir = mkdtempSync(join(tmpdir(), "agl-sqlite-shared-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

describe("SqliteLightningStore shared by several instances and processes", () => {
  let path = "";
  sharedDbTests({
    reset: async () => {
      path = join(dir, `shared-${n++}.db`);
    },
    open: async (options) => new SqliteLightningStore(path, options),
    uri: () => `sqlite:${path}`,
  });
});

describe("SqliteLightningStore schema and settings", () => {
  it("applies migrations once; reopening an existing file is idempotent", async () => {
    const file = join(dir, "migrations.db");
    const store = new SqliteLightningStore(file);
    await store.enqueueRollout({ input: "kept" });
    await store.close();
    const again = new SqliteLightningStore(file);
    expect((await again.queryRollouts()).items.map((r) => r.input)).toEqual(["kept"]);
    await again.close();
    const db = new Database(file);
    try {
      expect(migrateSqlite(db)).toEqual([]);
      const rows = db.prepare("SELECT version FROM schema_migrations ORDER BY version").all() as Array<{
        version: number;
      }>;
      expect(rows.map((r) => r.version)).toEqual(SQLITE_MIGRATIONS.map((m) => m.version));
      expect(db.pragma("journal_mode", { simple: true })).toBe("wal");
      const indexes = (
        db.prepare("SELECT name FROM sqlite_master WHERE type = 'index'").all() as Array<{ name: string }>
      ).map((r) => r.name);
      expect(indexes).toEqual(
        expect.arrayContaining([
          "rollouts_queue",
          "rollouts_deadline",
          "spans_by_attempt",
          "spans_by_sequence",
        ]),
      );
    } finally {
      db.close();
    }
  });

  it("migration 2 upgrades a version-1 file; the dashboard's default order then reads the index", async () => {
    const file = join(dir, "start-time-index.db");
    const old = new Database(file);
    expect(migrateSqlite(old, SQLITE_MIGRATIONS.slice(0, 1))).toEqual([1]);
    old.close();
    const store = new SqliteLightningStore(file);
    const made = await store.enqueueManyRollouts(Array.from({ length: 5 }, (_, i) => ({ input: i })));
    const newest = await store.queryRollouts({ sortBy: "start_time", sortOrder: "desc", limit: 2 });
    expect(newest.items.map((r) => r.rollout_id)).toEqual(
      [...made]
        .sort((a, b) => b.start_time - a.start_time)
        .slice(0, 2)
        .map((r) => r.rollout_id),
    );
    await store.close();
    const db = new Database(file);
    try {
      expect(migrateSqlite(db)).toEqual([]);
      // The exact ORDER BY the store sends for this sort (see shared/sql-query.ts).
      const page = { sortBy: "start_time", sortOrder: "desc", limit: 50, offset: 0 } as const;
      const orderBy = orderBySql(page, ROLLOUT_COLUMNS, sqliteDialect, "pk");
      const plan = (
        db
          .prepare(`EXPLAIN QUERY PLAN SELECT * FROM rollouts WHERE 1 = 1 ORDER BY ${orderBy} LIMIT 50`)
          .all() as Array<{ detail: string }>
      )
        .map((r) => r.detail)
        .join(" | ");
      expect(plan).toContain("USING INDEX rollouts_by_start_time_desc");
      expect(plan).not.toContain("TEMP B-TREE");
    } finally {
      db.close();
    }
  });

  it("a newer migration is applied to an existing file on open", () => {
    const file = join(dir, "upgrade.db");
    const db = new Database(file);
    try {
      expect(migrateSqlite(db)).toEqual(SQLITE_MIGRATIONS.map((m) => m.version));
      const extra = [
        ...SQLITE_MIGRATIONS,
        { version: 99, name: "test column", sql: "ALTER TABLE workers ADD COLUMN note TEXT" },
      ];
      expect(migrateSqlite(db, extra)).toEqual([99]);
      expect(migrateSqlite(db, extra)).toEqual([]);
    } finally {
      db.close();
    }
  });

  it("openStore picks the backend from the URI", async () => {
    const file = join(dir, "open.db");
    for (const uri of [`sqlite:${file}`, file, `sqlite://${file}`]) {
      const store = await openStore(uri);
      expect(store).toBeInstanceOf(SqliteLightningStore);
      await store.close();
    }
    const memory = await openStore("memory:");
    expect((await memory.statistics()).name).toBe("InMemoryLightningStore");
    await memory.close();
    await expect(openStore("redis://x")).rejects.toThrow(/unsupported store URI/);
  });
});
