/**
 * Round trips and commits of the PostgreSQL store's hot writes. Sequence ids are handed out by the
 * span insert itself: one transaction stores the spans and moves the counter, and the ids given are
 * the ones the in-memory store gives for the same calls (reserve, then store), including saturation
 * at MAX_SPAN_SEQUENCE_ID and rollouts with spans of both kinds in one batch. start_rollout is one
 * statement, with no BEGIN/COMMIT round trips.
 */
import {
  InMemoryLightningStore,
  type LightningStore,
  MAX_SPAN_SEQUENCE_ID,
  type Span,
  type SpanInput,
} from "@agl/core";
import fc from "fast-check";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { countStatements, testSpan, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { storeOtlpSpans } from "../server/otlp/store-spans.js";
import { PostgresLightningStore } from "./postgres-store.js";

const pgdb = usePgTestDatabase("seq");
let admin: pg.Client;
beforeAll(() => {
  admin = pgdb.admin();
});

async function openStore(): Promise<{ store: PostgresLightningStore; schema: string }> {
  const schema = pgdb.schema();
  // No watchdog passes nor LISTEN reconnects: the transaction count below is the calls' alone.
  const options = { schema, poolSize: 4, watchdog: false, listen: false };
  return { store: await PostgresLightningStore.connect(pgdb.url(), options), schema };
}

const span = testSpan;

/** Transactions the store's connections run from now on, and statements (see countStatements). */
function countTransactions(): { count: () => number; statements: () => number; stop: () => void } {
  const counted = countStatements(admin);
  return { count: counted.transactions, statements: counted.statements, stop: counted.stop };
}

/** What a store without the capability does for the same call: reserve the missing ids, then store. */
async function reserveThenStore(
  store: LightningStore,
  spans: SpanInput[],
  assign: boolean[],
): Promise<Span[]> {
  const pairs = spans.filter((_, i) => assign[i]).map((s) => [s.rollout_id, s.attempt_id] as const);
  const ids = pairs.length > 0 ? await store.getManySpanSequenceIds(pairs) : [];
  let next = 0;
  return store.addManySpans(spans.map((s, i) => (assign[i] ? { ...s, sequence_id: ids[next++]! } : s)));
}

describe("PostgreSQL: start_rollout in one statement", () => {
  it("inserts the rollout in its final state with the latest resources, in one statement", async () => {
    const { store, schema } = await openStore();
    try {
      const res = await store.addResources({
        llm: {
          resource_type: "llm",
          endpoint: "http://x",
          model: "m",
          api_key: null,
          sampling_parameters: {},
        },
      });
      const counted = countTransactions();
      let started: Awaited<ReturnType<typeof store.startRollout>>;
      try {
        started = await store.startRollout({ input: { q: 1 }, worker_id: "w1" });
      } finally {
        counted.stop();
      }
      // Before: BEGIN, the latest resources, the insert, the update of the inserted row, COMMIT.
      expect(counted.statements()).toBe(1);
      expect(counted.count()).toBe(1);
      expect(started.resources_id).toBe(res.resources_id);
      const explicit = await store.startRollout({ input: 2, resources_id: "res-other" });
      expect(explicit.resources_id).toBe("res-other");
      const { rows } = await admin.query(
        `SELECT status, attempt_count, resources_id, queue_seq, xmax::text = '0' AS never_updated,
           (SELECT COUNT(*)::int FROM ${schema}.attempts a WHERE a.rollout_id = r.rollout_id) AS attempts
         FROM ${schema}.rollouts r WHERE rollout_id = $1`,
        [started.rollout_id],
      );
      expect(rows[0]).toMatchObject({
        status: "preparing",
        attempt_count: 1,
        resources_id: res.resources_id,
        queue_seq: null,
        // Inserted in its final state: no UPDATE (nor lock) of the new row.
        never_updated: true,
        attempts: 1,
      });
      expect(await store.getRolloutById(started.rollout_id)).toEqual(started);
      const worker = await store.getWorkerById("w1");
      expect(worker?.current_rollout_id).toBe(started.rollout_id);
    } finally {
      await store.close();
    }
  });
});

describe("PostgreSQL: sequence ids given by the span insert", () => {
  it("spans and the counter move in one transaction; stored data carries the id given", async () => {
    const { store, schema } = await openStore();
    try {
      const r = await store.startRollout({ input: 1 });
      const aid = r.attempt.attempt_id;
      const stored = await store.addManySpansAssigningSequences(
        [span(r.rollout_id, aid, "a", 0), span(r.rollout_id, aid, "b", 0)],
        [true, true],
      );
      expect(stored.map((s) => s.sequence_id)).toEqual([1, 2]);
      // Before, the ids were reserved by a transaction (and a commit) of their own.
      const { rows } = await admin.query(
        `SELECT (SELECT xmin::text FROM ${schema}.span_sequences WHERE rollout_id = $1) AS counter,
                ARRAY(SELECT DISTINCT xmin::text FROM ${schema}.spans WHERE rollout_id = $1) AS spans`,
        [r.rollout_id],
      );
      expect(rows[0].spans).toEqual([rows[0].counter]);
      const read = await store.querySpans(r.rollout_id);
      expect(read.items.map((s) => [s.span_id, s.sequence_id])).toEqual([
        ["a", 1],
        ["b", 2],
      ]);
      expect(await store.getNextSpanSequenceId(r.rollout_id, aid)).toBe(3);
    } finally {
      await store.close();
    }
  });

  it("an OTLP export of spans without ids is one transaction: ids, spans and activity commit together", async () => {
    const { store, schema } = await openStore();
    try {
      const r = await store.startRollout({ input: 1 });
      const aid = r.attempt.attempt_id;
      const pending = ["o1", "o2"].map((id) => {
        const { sequence_id: _, ...rest } = span(r.rollout_id, aid, id, 0);
        return { span: rest, rolloutId: r.rollout_id, attemptId: aid };
      });
      const transactions = countTransactions();
      let outcome: Awaited<ReturnType<typeof storeOtlpSpans>>;
      try {
        outcome = await storeOtlpSpans(store, pending, []);
      } finally {
        transactions.stop();
      }
      expect(outcome.refusals).toEqual([]);
      // The reservation used to be a transaction (and a commit) of its own before the spans' one.
      expect(transactions.count()).toBe(1);
      const { rows } = await admin.query(
        `SELECT (SELECT xmin::text FROM ${schema}.span_sequences WHERE rollout_id = $1) AS counter,
                (SELECT xmin::text FROM ${schema}.attempts WHERE rollout_id = $1) AS attempt,
                ARRAY(SELECT DISTINCT xmin::text FROM ${schema}.spans WHERE rollout_id = $1) AS spans`,
        [r.rollout_id],
      );
      expect(rows[0].spans).toEqual([rows[0].counter]);
      expect(rows[0].attempt).toBe(rows[0].counter);
      const read = await store.querySpans(r.rollout_id);
      expect(read.items.map((s) => [s.span_id, s.sequence_id])).toEqual([
        ["o1", 1],
        ["o2", 2],
      ]);
    } finally {
      await store.close();
    }
  });

  it("concurrent reservations and inserts never hand out an id twice", async () => {
    const { store } = await openStore();
    try {
      const r = await store.startRollout({ input: 1 });
      const aid = r.attempt.attempt_id;
      const ids = await Promise.all([
        ...Array.from({ length: 20 }, (_, i) =>
          store
            .addManySpansAssigningSequences([span(r.rollout_id, aid, `s${i}`, 0)], [true])
            .then((s) => s[0]!.sequence_id),
        ),
        ...Array.from({ length: 20 }, () => store.getNextSpanSequenceId(r.rollout_id, aid)),
      ]);
      expect([...ids].sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    } finally {
      await store.close();
    }
  });

  it("a bad target fails the call and gives no id; the counter is unchanged", async () => {
    const { store } = await openStore();
    try {
      const r = await store.startRollout({ input: 1 });
      await expect(
        store.addManySpansAssigningSequences([span(r.rollout_id, "at-missing", "x", 0)], [true]),
      ).rejects.toThrow(/not found/);
      await expect(
        store.addManySpansAssigningSequences([span(r.rollout_id, "at-x", "x", 0)], []),
      ).rejects.toThrow(/assign/);
      expect(await store.getNextSpanSequenceId(r.rollout_id, r.attempt.attempt_id)).toBe(1);
    } finally {
      await store.close();
    }
  });

  it("gives the ids the in-memory store gives for the same calls (fast-check)", async () => {
    const { store: pgStore, schema } = await openStore();
    try {
      let run = 0;
      // Each call: spans over two rollouts, each span either an id to hand out or one a client chose.
      const call = fc.array(
        fc.record({
          rollout: fc.integer({ min: 0, max: 1 }),
          assign: fc.boolean(),
          seq: fc.oneof(fc.integer({ min: 0, max: 40 }), fc.constant(MAX_SPAN_SEQUENCE_ID)),
        }),
        { minLength: 1, maxLength: 6 },
      );
      await fc.assert(
        fc.asyncProperty(
          fc.array(call, { minLength: 1, maxLength: 5 }),
          fc.integer({ min: 0, max: 3 }),
          async (calls, nearTop) => {
            const ids: string[] = [];
            const aids: string[] = [];
            for (let i = 0; i < 2; i++) {
              const r = await pgStore.startRollout({ input: i });
              ids.push(r.rollout_id);
              aids.push(r.attempt.attempt_id);
            }
            if (nearTop > 0) {
              // Start the first rollout's counter just below the top of the range.
              await admin.query(
                `INSERT INTO ${schema}.span_sequences VALUES ($1, $2)
                 ON CONFLICT (rollout_id) DO UPDATE SET value = EXCLUDED.value`,
                [ids[0], MAX_SPAN_SEQUENCE_ID - nearTop],
              );
            }
            const memIds = await memoryTwinIds(calls, nearTop);
            const got: number[][] = [];
            let n = 0;
            for (const c of calls) {
              const spans = c.map((s) => span(ids[s.rollout]!, aids[s.rollout]!, `r${run}-${n++}`, s.seq));
              const stored = await pgStore.addManySpansAssigningSequences(
                spans,
                c.map((s) => s.assign),
              );
              got.push(stored.map((s) => s.sequence_id));
            }
            got.push([
              await pgStore.getNextSpanSequenceId(ids[0]!, aids[0]!),
              await pgStore.getNextSpanSequenceId(ids[1]!, aids[1]!),
            ]);
            run++;
            expect(got).toEqual(memIds);
          },
        ),
        { numRuns: 25 },
      );
    } finally {
      await pgStore.close();
    }
  });
});

/** The same calls on a fresh in-memory store (its own rollouts), through reserve-then-store. */
async function memoryTwinIds(
  calls: Array<Array<{ rollout: number; assign: boolean; seq: number }>>,
  nearTop: number,
): Promise<number[][]> {
  const mem = new InMemoryLightningStore();
  const rs = [await mem.startRollout({ input: 0 }), await mem.startRollout({ input: 1 })];
  if (nearTop > 0) {
    // A span at the starting value moves the in-memory counter there, as the row written above does.
    await mem.addSpan(
      span(rs[0]!.rollout_id, rs[0]!.attempt.attempt_id, "start", MAX_SPAN_SEQUENCE_ID - nearTop),
    );
  }
  const out: number[][] = [];
  let n = 0;
  for (const c of calls) {
    const spans = c.map((s) =>
      span(rs[s.rollout]!.rollout_id, rs[s.rollout]!.attempt.attempt_id, `m-${n++}`, s.seq),
    );
    const stored = await reserveThenStore(
      mem,
      spans,
      c.map((s) => s.assign),
    );
    out.push(stored.map((s) => s.sequence_id));
  }
  out.push([
    await mem.getNextSpanSequenceId(rs[0]!.rollout_id, rs[0]!.attempt.attempt_id),
    await mem.getNextSpanSequenceId(rs[1]!.rollout_id, rs[1]!.attempt.attempt_id),
  ]);
  return out;
}
