import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { PostgresLightningStore } from "./postgres-store.js";

let db: { url: string; drop: () => Promise<void> };
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
});

/** Counts the waiters' re-reads of `store` (its terminal-rollouts query). */
function countReads(store: PostgresLightningStore): { reads: number } {
  const counter = { reads: 0 };
  const queries = (store as unknown as { queries: { terminalRollouts: (ids: string[]) => unknown } }).queries;
  const original = queries.terminalRollouts.bind(queries);
  queries.terminalRollouts = (ids: string[]) => {
    counter.reads++;
    return original(ids);
  };
  return counter;
}

describe("PostgreSQL waits: one LISTEN connection per process, no query per waiter", () => {
  it("waiters do not poll while notifications are live, and wake on another process's NOTIFY", async () => {
    const schema = `w${process.pid}_a`;
    // Another url for the same database: a separate in-process hub, so only NOTIFY can reach the waiters.
    const waiting = await PostgresLightningStore.connect(db.url, { schema, waitPollIntervalMs: 20 });
    const other = await PostgresLightningStore.connect(`${db.url}?application_name=other`, { schema });
    try {
      const rollouts = await Promise.all(
        Array.from({ length: 200 }, (_, i) => other.startRollout({ input: i })),
      );
      const counter = countReads(waiting);
      const waits = rollouts.map((r) => waiting.waitForRollouts([r.rollout_id], { timeoutSeconds: 30 }));
      await new Promise((r) => setTimeout(r, 1000));
      // Two reads per waiter as it starts; polling every 20 ms for 1 s would have been ~10,000.
      expect(counter.reads).toBeLessThanOrEqual(400);
      for (const r of rollouts)
        await other.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
      const done = await Promise.all(waits);
      expect(done.every((d) => d.length === 1 && d[0]!.status === "succeeded")).toBe(true);
    } finally {
      await waiting.close();
      await other.close();
    }
  });

  it("when the LISTEN connection is killed, waiters fall back to polling and it reconnects", async () => {
    const schema = `w${process.pid}_b`;
    const waiting = await PostgresLightningStore.connect(db.url, { schema, waitPollIntervalMs: 50 });
    const other = await PostgresLightningStore.connect(`${db.url}?application_name=other`, { schema });
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      const r = await other.startRollout({ input: 1 });
      const wait = waiting.waitForRollouts([r.rollout_id], { timeoutSeconds: 30 });
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE query LIKE 'LISTEN agl_terminal_${schema}%' AND pid <> pg_backend_pid()`,
      );
      await other.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
      expect((await wait).map((x) => x.status)).toEqual(["succeeded"]);
      const live = () => (waiting as unknown as { notificationsLive(): boolean }).notificationsLive();
      for (let i = 0; i < 100 && !live(); i++) await new Promise((res) => setTimeout(res, 100));
      expect(live()).toBe(true);
    } finally {
      await admin.end();
      await waiting.close();
      await other.close();
    }
  });
});
