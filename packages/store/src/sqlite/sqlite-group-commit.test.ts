import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NotFoundError, StoreClosedError } from "@agl/core";
import { makeSpan } from "@agl/core/testing";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SqliteLightningStore } from "./sqlite-store.js";

let dir: string;
let path: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "agl-sqlite-group-"));
  path = join(dir, "store.db");
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

/** Empty the WAL (from a second connection), so the next writes' frames can be counted. */
function truncateWal(): void {
  const other = new Database(path);
  try {
    other.pragma("wal_checkpoint(TRUNCATE)");
  } finally {
    other.close();
  }
}
const walBytes = () => statSync(`${path}-wal`).size;

describe("SqliteLightningStore group commit", () => {
  it("concurrent requests share one commit: far fewer WAL bytes than the same writes one after another", async () => {
    const store = new SqliteLightningStore(path);
    try {
      const r = await store.startRollout({ input: {} });
      const spans = (from: number) => Array.from({ length: 32 }, (_, i) => makeSpan(r.attempt, from + i));
      truncateWal();
      for (const s of spans(0)) await store.addSpan(s);
      const oneByOne = walBytes();
      truncateWal();
      const stored = await Promise.all(spans(100).map((s) => store.addSpan(s)));
      const together = walBytes();
      expect(stored.map((s) => s?.sequence_id)).toEqual(spans(100).map((_, i) => 100 + i));
      // 32 commits append the spans, attempts and rollouts pages 32 times; one commit appends each once.
      expect(together * 4).toBeLessThan(oneByOne);
      expect((await store.querySpans(r.rollout_id)).total).toBe(64);
    } finally {
      await store.close();
    }
  });

  it("one bad request of a batch fails alone with its own error; its neighbours are stored", async () => {
    const store = new SqliteLightningStore(path);
    try {
      const r = await store.startRollout({ input: {} });
      const results = await Promise.allSettled([
        store.addSpan(makeSpan(r.attempt, 1)),
        store.addSpan(makeSpan({ rollout_id: "ro-missing", attempt_id: "at-missing" }, 2)),
        store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" }),
      ]);
      expect(results.map((x) => x.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
      expect(NotFoundError.isInstance((results[1] as PromiseRejectedResult).reason)).toBe(true);
      expect((await store.querySpans(r.rollout_id)).total).toBe(1);
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
    } finally {
      await store.close();
    }
  });

  it("close() commits and answers the writes already queued; a reopen finds every write it answered", async () => {
    const store = new SqliteLightningStore(path);
    const r = await store.startRollout({ input: {} });
    // startRollout queues its write at once; addSpan first awaits its checks, so close may win.
    const queued = store.startRollout({ input: { n: 2 } });
    const racing = [1, 2, 3].map((n) => store.addSpan(makeSpan(r.attempt, n)));
    await store.close();
    const second = await queued;
    const outcomes = await Promise.allSettled(racing);
    for (const o of outcomes)
      if (o.status === "rejected") expect(StoreClosedError.isInstance(o.reason)).toBe(true);
    const answered = outcomes.filter((o) => o.status === "fulfilled").length;
    const reopened = new SqliteLightningStore(path);
    try {
      expect((await reopened.getRolloutById(second.rollout_id))?.input).toEqual({ n: 2 });
      expect((await reopened.querySpans(r.rollout_id)).total).toBe(answered);
    } finally {
      await reopened.close();
    }
  });
});
