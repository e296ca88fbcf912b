/**
 * What a stored span does to its attempt and rollout on PostgreSQL, whichever path stores it (the
 * one-call agl_ingest_spans of pg-span-ingest.ts or the general transaction), against the in-memory
 * store given the same calls, and the stored watchdog deadline against @agl/core's
 * nextWatchdogDeadline of the state read back. Also: the covered batches take one statement.
 */
import {
  type Attempt,
  InMemoryLightningStore,
  type LightningStore,
  nextWatchdogDeadline,
  type RolloutConfigInput,
} from "@agl/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { countStatements, testSpan, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { PostgresLightningStore } from "./postgres-store.js";

const pgdb = usePgTestDatabase("act");

const span = testSpan;

interface Scenario {
  worker: boolean;
  config: RolloutConfigInput;
  /** What happens before the span. */
  before: "none" | "running" | "unresponsive" | "succeeded" | "second-attempt" | "cancelled";
  /** The span's attempt: the latest, or the first one. */
  target: "latest" | "first";
  assign: boolean;
}

/** Run a scenario on a store; the outcome of each step and the state after the span. */
async function play(store: LightningStore, s: Scenario, n: number) {
  const steps: string[] = [];
  const step = async (f: () => Promise<unknown>) => {
    try {
      await f();
      steps.push("ok");
    } catch (error) {
      steps.push((error as Error).name);
    }
  };
  const r = await store.startRollout({
    input: n,
    worker_id: s.worker ? `w${n}` : null,
    config: s.config,
  });
  const rid = r.rollout_id;
  const first = r.attempt.attempt_id;
  if (s.before === "running" || s.before === "unresponsive" || s.before === "succeeded")
    await step(() => store.updateAttempt(rid, first, { status: s.before as Attempt["status"] }));
  if (s.before === "second-attempt") await step(() => store.startAttempt(rid));
  if (s.before === "cancelled") await step(() => store.updateRollout(rid, { status: "cancelled" }));
  const attempts = await store.queryAttempts(rid);
  const aid = s.target === "first" ? first : attempts.items.at(-1)!.attempt_id;
  await step(async () => {
    // The in-memory store has no one-call variant: reserve the id, then store.
    const assigning = store instanceof PostgresLightningStore;
    const stored = !s.assign
      ? [await store.addSpan(span(rid, aid, "s1", 7))]
      : assigning
        ? await store.addManySpansAssigningSequences([span(rid, aid, "s1", 0)], [true])
        : [await store.addSpan(span(rid, aid, "s1", await store.getNextSpanSequenceId(rid, aid)))];
    steps.push(`seq ${stored[0]?.sequence_id}`);
  });
  const rollout = (await store.getRolloutById(rid))!;
  const after = (await store.queryAttempts(rid)).items;
  return {
    rid,
    steps,
    status: rollout.status,
    ended: rollout.end_time !== null,
    attempts: after.map((a) => ({
      status: a.status,
      ended: a.end_time !== null,
      alive: a.last_heartbeat_time !== null,
    })),
    worker: s.worker ? (await store.getWorkerById(`w${n}`))?.status : null,
  };
}

const scenario: fc.Arbitrary<Scenario> = fc.record({
  worker: fc.boolean(),
  config: fc.record({
    timeout_seconds: fc.oneof(fc.constant(null), fc.integer({ min: 100, max: 10_000 })),
    unresponsive_seconds: fc.oneof(fc.constant(null), fc.double({ min: 50, max: 5_000, noNaN: true })),
  }),
  before: fc.constantFrom("none", "running", "unresponsive", "succeeded", "second-attempt", "cancelled"),
  target: fc.constantFrom("latest", "first"),
  assign: fc.boolean(),
});

describe("PostgreSQL: a span's activity", () => {
  it("matches the in-memory store, and the stored deadline matches nextWatchdogDeadline (fast-check)", async () => {
    const schema = pgdb.schema();
    const pg = await PostgresLightningStore.connect(pgdb.url(), { schema, poolSize: 4, watchdog: false });
    const mem = new InMemoryLightningStore({ watchdog: false });
    let n = 0;
    try {
      await fc.assert(
        fc.asyncProperty(scenario, async (s) => {
          n++;
          const got = await play(pg, s, n);
          const want = await play(mem, s, n);
          expect({ ...got, rid: "" }).toEqual({ ...want, rid: "" });
          const { rows } = await pgdb
            .admin()
            .query(`SELECT deadline FROM ${schema}.rollouts WHERE rollout_id = $1`, [got.rid]);
          const rollout = (await pg.getRolloutById(got.rid))!;
          const latest = (await pg.queryAttempts(got.rid)).items.at(-1)!;
          expect(rows[0].deadline).toBe(nextWatchdogDeadline(rollout, latest));
        }),
        { numRuns: 60 },
      );
    } finally {
      await pg.close();
      await mem.close();
    }
  });

  it("the first and later spans of a rollout's attempt are one statement each, committed on their own", async () => {
    const pg = await PostgresLightningStore.connect(pgdb.url(), {
      schema: pgdb.schema(),
      poolSize: 4,
      watchdog: false,
      listen: false,
    });
    try {
      const r = await pg.startRollout({ input: 1, config: { unresponsive_seconds: 60 } });
      const aid = r.attempt.attempt_id;
      const counted = countStatements(pgdb.admin());
      try {
        await pg.addManySpansAssigningSequences([span(r.rollout_id, aid, "a", 0)], [true]);
        await pg.addSpan(span(r.rollout_id, aid, "b", 9));
      } finally {
        counted.stop();
      }
      // Before: BEGIN, lock, latest attempt, insert, activity, COMMIT for each.
      expect(counted.statements()).toBe(2);
      expect(counted.transactions()).toBe(2);
      expect((await pg.getRolloutById(r.rollout_id))?.status).toBe("running");
      expect((await pg.querySpans(r.rollout_id)).items.map((s) => s.sequence_id)).toEqual([1, 9]);
    } finally {
      await pg.close();
    }
  });
});
