import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotFoundError } from "@agl/core";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteDb } from "./sqlite-db.js";
import { SqliteLightningStore } from "./sqlite-store.js";

let dir: string;
let store: SqliteLightningStore;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-sqlite-db-"));
  store = new SqliteLightningStore(join(dir, "s.db"));
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("SqliteDb.load (rollout and latest attempt in one read)", () => {
  it("returns the latest attempt exactly as stored, null when there is none, NotFound for an unknown id", async () => {
    const started = await store.startRollout({ input: { q: 1 }, metadata: { m: "x" } });
    await store.updateAttempt(started.rollout_id, started.attempt.attempt_id, {
      status: "failed",
      metadata: { why: "first" },
    });
    const second = await store.startAttempt(started.rollout_id, { workerId: "w-1" });
    const queued = await store.enqueueRollout({ input: "later" });

    const db = new Database(join(dir, "s.db"), { readonly: true });
    try {
      const data = new SqliteDb(db);
      const loaded = data.load(started.rollout_id);
      expect(loaded.latest).toEqual(second.attempt);
      expect(loaded.latest?.sequence_id).toBe(2);
      expect(loaded.rollout).toEqual(await store.getRolloutById(started.rollout_id).then(stripAttempt));
      expect(loaded.row.attempt_count).toBe(2);

      const none = data.load(queued.rollout_id);
      expect(none.latest).toBeNull();
      expect(none.rollout).toEqual(queued);

      expect(() => data.load("ro-missing")).toThrow(NotFoundError);
    } finally {
      db.close();
    }
  });
});

function stripAttempt(r: unknown): unknown {
  const { attempt: _attempt, ...rest } = r as Record<string, unknown>;
  return rest;
}
