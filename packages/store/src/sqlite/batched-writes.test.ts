import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BatchedWrites } from "./batched-writes.js";

let dir: string;
let db: Database.Database;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-batched-"));
  db = new Database(join(dir, "t.db"));
  db.pragma("journal_mode = WAL");
  db.pragma("synchronous = NORMAL");
  db.pragma("wal_autocheckpoint = 0");
  db.exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER NOT NULL)");
  db.pragma("wal_checkpoint(TRUNCATE)");
});

afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** WAL frames written so far: every commit appends each page it changed (header 32 B, frame 24 B + page). */
function walFrames(): number {
  const pageSize = db.pragma("page_size", { simple: true }) as number;
  return (statSync(join(dir, "t.db-wal")).size - 32) / (24 + pageSize);
}

const insert = (k: string, v: number) => () =>
  db.prepare("INSERT INTO t (k, v) VALUES (?, ?)").run(k, v).changes;

describe("BatchedWrites", () => {
  it("commits the writes asked for together in one transaction: one WAL append, not one per write", async () => {
    const writes = new BatchedWrites(db);
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => writes.run(insert(`k${i}`, i))));
    expect(results).toEqual(Array(50).fill(1));
    expect(db.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 50 });
    // One commit of the table's page and its key index's page; 50 commits would append 100 frames.
    expect(walFrames()).toBe(2);
  });

  it("a write that throws fails alone and leaves nothing behind; the others commit and see each other", async () => {
    const writes = new BatchedWrites(db);
    const after: string[] = [];
    const a = writes.run(insert("a", 1), () => after.push("a"));
    const bad = writes.run(
      () => {
        db.prepare("INSERT INTO t (k, v) VALUES ('half', 0)").run();
        return insert("a", 2)(); // primary key taken: the savepoint rolls 'half' back too
      },
      () => after.push("bad"),
    );
    const c = writes.run(
      () => (db.prepare("SELECT v FROM t WHERE k = 'a'").get() as { v: number }).v,
      () => after.push("c"),
    );
    await expect(a).resolves.toBe(1);
    await expect(bad).rejects.toThrow(/UNIQUE/);
    await expect(c).resolves.toBe(1);
    expect(after).toEqual(["a", "c"]);
    expect(db.prepare("SELECT k FROM t ORDER BY k").all()).toEqual([{ k: "a" }]);
  });

  it("answers only after the commit: another connection already sees the write", async () => {
    const writes = new BatchedWrites(db);
    const other = new Database(join(dir, "t.db"), { readonly: true });
    try {
      const seen = await writes
        .run(insert("x", 7))
        .then(() => other.prepare("SELECT v FROM t WHERE k = 'x'").get());
      expect(seen).toEqual({ v: 7 });
    } finally {
      other.close();
    }
  });

  it("when the transaction cannot begin, every write of the batch fails with that error and none is stored", async () => {
    const writes = new BatchedWrites(db);
    const blocker = new Database(join(dir, "t.db"), { timeout: 0 });
    db.pragma("busy_timeout = 0");
    blocker.prepare("BEGIN IMMEDIATE").run();
    try {
      const both = [writes.run(insert("p", 1)), writes.run(insert("q", 2))];
      for (const p of both) await expect(p).rejects.toThrow(/locked|busy/i);
    } finally {
      blocker.prepare("ROLLBACK").run();
      blocker.close();
    }
    expect(db.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 0 });
  });

  it("flush() runs what is queued at once (close), more than one batch's worth too", async () => {
    const writes = new BatchedWrites(db);
    const all = Array.from({ length: 300 }, (_, i) => writes.run(insert(`k${i}`, i)));
    writes.flush();
    expect(db.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 300 });
    expect(await Promise.all(all)).toEqual(Array(300).fill(1));
  });

  it("a lone write that throws leaves nothing behind, and the next batch commits", async () => {
    const writes = new BatchedWrites(db);
    const bad = writes.run(() => {
      db.prepare("INSERT INTO t (k, v) VALUES ('half', 0)").run();
      throw new Error("boom");
    });
    await expect(bad).rejects.toThrow("boom");
    expect(db.inTransaction).toBe(false);
    await expect(writes.run(insert("next", 1))).resolves.toBe(1);
    expect(db.prepare("SELECT k FROM t ORDER BY k").all()).toEqual([{ k: "next" }]);
  });

  it("a write may open its own (nested) transaction inside the batch's", async () => {
    const writes = new BatchedWrites(db);
    const nested = () => db.transaction(() => insert("n", 3)())();
    const both = await Promise.all([writes.run(insert("m", 2)), writes.run(nested)]);
    expect(both).toEqual([1, 1]);
    expect(db.prepare("SELECT k FROM t ORDER BY k").all()).toEqual([{ k: "m" }, { k: "n" }]);
  });

  it("a write that ends the batch's transaction fails the batch: nothing stored, no later write runs outside it", async () => {
    const writes = new BatchedWrites(db);
    const ran: string[] = [];
    const first = writes.run(insert("first", 1));
    const breaker = writes.run(() => {
      db.prepare("ROLLBACK").run();
      throw new Error("transaction lost");
    });
    const later = writes.run(() => {
      ran.push("later");
      return insert("later", 2)();
    });
    await expect(breaker).rejects.toThrow("transaction lost");
    // Neither is stored, so neither may be acknowledged.
    await expect(first).rejects.toThrow("transaction lost");
    await expect(later).rejects.toThrow("transaction lost");
    expect(ran).toEqual([]);
    expect(db.prepare("SELECT COUNT(*) AS n FROM t").get()).toEqual({ n: 0 });
    expect(db.inTransaction).toBe(false);
  });
});
