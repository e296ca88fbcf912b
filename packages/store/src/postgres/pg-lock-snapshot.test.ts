/**
 * A write that waited for another transaction's lock on its rollout sees that transaction's changes
 * to the rollout's attempts: agl_lock_rollouts reads the latest attempt only once the lock is held.
 * (Read together with the locking statement, the attempt would be the version from before the other
 * transaction, and writing it back would undo its change.) Both in one round trip.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { countStatements, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { PostgresLightningStore } from "./postgres-store.js";

const pgdb = usePgTestDatabase("lck");

/** Resolves once some connection of the database waits for a row lock. */
async function someoneWaitsForALock(admin: pg.Client): Promise<void> {
  for (;;) {
    const { rows } = await admin.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
    );
    if (rows[0].n > 0) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("PostgreSQL: locking a rollout reads its attempts after the lock", () => {
  it("an attempt update that waited keeps the other transaction's change of the attempt", async () => {
    const schema = pgdb.schema();
    const store = await PostgresLightningStore.connect(pgdb.url(), {
      schema,
      watchdog: false,
      listen: false,
    });
    const holder = new pg.Client({ connectionString: pgdb.url(), options: `-c search_path=${schema}` });
    await holder.connect();
    try {
      const r = await store.startRollout({ input: 1 });
      const rid = r.rollout_id;
      const aid = r.attempt.attempt_id;
      await store.updateAttempt(rid, aid, { status: "running" });
      // Another writer holds the rollout's lock and finishes the attempt.
      await holder.query("BEGIN");
      await holder.query("SELECT 1 FROM rollouts WHERE rollout_id = $1 FOR UPDATE", [rid]);
      const waiting = store.updateAttempt(rid, aid, { metadata: { note: "after" } });
      await someoneWaitsForALock(pgdb.admin());
      await holder.query(
        "UPDATE attempts SET status = 'succeeded', end_time = 5 WHERE rollout_id = $1 AND attempt_id = $2",
        [rid, aid],
      );
      await holder.query("COMMIT");
      const updated = await waiting;
      expect(updated.status).toBe("succeeded");
      const stored = (await store.queryAttempts(rid)).items[0]!;
      expect({ status: stored.status, end_time: stored.end_time, metadata: stored.metadata }).toEqual({
        status: "succeeded",
        end_time: 5,
        metadata: { note: "after" },
      });
    } finally {
      await holder.end();
      await store.close();
    }
  });

  it("an attempt update is BEGIN, one locking call, one write and COMMIT", async () => {
    const schema = pgdb.schema();
    const store = await PostgresLightningStore.connect(pgdb.url(), {
      schema,
      watchdog: false,
      listen: false,
    });
    try {
      const r = await store.startRollout({ input: 1 });
      const counted = countStatements(pgdb.admin());
      try {
        await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
      } finally {
        counted.stop();
      }
      // Before agl_lock_rollouts: the lock and the latest attempts' read were two statements.
      expect(counted.statements()).toBe(4);
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
    } finally {
      await store.close();
    }
  });
});
