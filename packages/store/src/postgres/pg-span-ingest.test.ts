/**
 * The span-ingest functions of the migrations agree: for spans of one attempt (all with or all
 * without their sequence ids), agl_ingest_attempt_spans (migration 4) answers and writes exactly what
 * agl_ingest_spans (migration 3) does, from the same rows: the same stored spans and sequence ids
 * (duplicates, saturation at MAX_SPAN_SEQUENCE_ID, counters raised by ids clients chose), the same
 * activity on the attempt and rollout, the same watchdog deadline, and the same "not covered" answer
 * with nothing written (missing rollout or attempt, not the latest attempt, a worker to mark busy,
 * a requeuing rollout). So does agl_ingest_one_span (migration 6) for a single span. Also: the store
 * sends such batches to these functions.
 */
import { MAX_SPAN_SEQUENCE_ID, type Span } from "@agl/core";
import fc from "fast-check";
import pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { testSpan, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { callForMany, callForOneAttempt, callForOneSpan, ingestSpansAtOnce } from "./pg-span-ingest.js";
import { PostgresLightningStore } from "./postgres-store.js";

const pgdb = usePgTestDatabase("ing");
/** The tables a span batch may write, each with an order of its rows that does not depend on serial keys. */
const TABLES = {
  rollouts: "rollout_id",
  attempts: "rollout_id, attempt_id",
  spans: "rollout_id, attempt_id, span_id",
  span_sequences: "rollout_id",
} as const;

/** A client on `schema` (the functions resolve their tables through the search path). */
async function clientOn(schema: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: pgdb.url(), options: `-c search_path=${schema}` });
  await c.connect();
  return c;
}

interface Setup {
  config: { timeout_seconds: number | null; unresponsive_seconds: number | null };
  worker: boolean;
  before: "none" | "running" | "second-attempt" | "requeuing" | "succeeded";
  counter: number | null;
}

/** Two schemas holding the same rollouts (same ids): `a` built through the store, `b` a copy of its rows. */
async function twin(setups: Setup[]): Promise<{ a: string; b: string; targets: Array<[string, string[]]> }> {
  const a = pgdb.schema();
  const b = pgdb.schema();
  const store = await PostgresLightningStore.connect(pgdb.url(), {
    schema: a,
    watchdog: false,
    listen: false,
  });
  const targets: Array<[string, string[]]> = [];
  try {
    for (const [i, s] of setups.entries()) {
      const r = await store.startRollout({
        input: i,
        config: s.config,
        worker_id: s.worker ? `w${i}` : null,
      });
      const rid = r.rollout_id;
      if (s.before === "running" || s.before === "succeeded")
        await store.updateAttempt(rid, r.attempt.attempt_id, { status: s.before });
      if (s.before === "second-attempt") await store.startAttempt(rid);
      if (s.before === "requeuing") await store.updateRollout(rid, { status: "requeuing" });
      const aids = (await store.queryAttempts(rid)).items.map((x) => x.attempt_id);
      targets.push([rid, [...aids, "no-such-attempt"]]);
      if (s.counter !== null)
        await pgdb.admin().query(`INSERT INTO ${a}.span_sequences VALUES ($1, $2)`, [rid, s.counter]);
    }
    targets.push(["no-such-rollout", ["x"]]);
  } finally {
    await store.close();
  }
  const other = await PostgresLightningStore.connect(pgdb.url(), {
    schema: b,
    watchdog: false,
    listen: false,
  });
  await other.close();
  for (const t of Object.keys(TABLES))
    await pgdb.admin().query(`INSERT INTO ${b}.${t} SELECT * FROM ${a}.${t}`);
  return { a, b, targets };
}

/** Every row of the four tables, serial keys left out (each schema numbers its own). */
async function state(schema: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const [t, order] of Object.entries(TABLES)) {
    const { rows } = await pgdb.admin().query(`SELECT * FROM ${schema}.${t} ORDER BY ${order}`);
    out[t] = rows.map(({ pk: _pk, ...rest }) => rest);
  }
  return out;
}

const setup: fc.Arbitrary<Setup> = fc.record({
  config: fc.record({
    timeout_seconds: fc.oneof(fc.constant(null), fc.integer({ min: 100, max: 10_000 })),
    unresponsive_seconds: fc.oneof(fc.constant(null), fc.double({ min: 50, max: 5_000, noNaN: true })),
  }),
  worker: fc.boolean(),
  before: fc.constantFrom("none", "running", "second-attempt", "requeuing", "succeeded"),
  counter: fc.oneof(
    fc.constant(null),
    fc.integer({ min: 0, max: 20 }),
    fc.constant(MAX_SPAN_SEQUENCE_ID - 2),
  ),
});

const batch = fc.record({
  target: fc.nat(),
  attempt: fc.nat(),
  assign: fc.boolean(),
  spans: fc.array(
    fc.record({ id: fc.constantFrom("a", "b", "c", "d"), seq: fc.integer({ min: 0, max: 40 }) }),
    { minLength: 1, maxLength: 4 },
  ),
});

type Batch = typeof batch extends fc.Arbitrary<infer B> ? B : never;
type Entries = Array<{ span: Span; assign: boolean }>;
type Call = (c: pg.Client, entries: Entries, now: number) => Promise<Array<{ o_sid: string | null }>>;

/** `call` answers and writes what agl_ingest_spans does, batch after batch, on twin schemas. */
async function agreesWithMany(
  call: Call,
  batches: fc.Arbitrary<Array<Batch>>,
  examples: Array<[Setup[], Batch[]]> = [],
) {
  await fc.assert(
    fc.asyncProperty(fc.array(setup, { minLength: 1, maxLength: 3 }), batches, async (setups, bts) => {
      const { a, b, targets } = await twin(setups);
      const [ca, cb] = [await clientOn(a), await clientOn(b)];
      try {
        for (const [k, bt] of bts.entries()) {
          const [rid, aids] = targets[bt.target % targets.length]!;
          const aid = aids[bt.attempt % aids.length]!;
          // One span per id, as the store passes them (firstOfEachSpan).
          const seen = new Set<string>();
          const entries = bt.spans
            .filter((s) => !seen.has(s.id) && seen.add(s.id))
            .map((s) => ({
              span: testSpan(rid, aid, s.id, bt.assign ? 0 : s.seq) as Span,
              assign: bt.assign,
            }));
          const now = 1_000 + k;
          const bySpan = (rows: Array<{ o_sid: string | null }>) =>
            rows.sort((x, y) => String(x.o_sid).localeCompare(String(y.o_sid)));
          const viaMany = bySpan(await callForMany(ca, structuredClone(entries), now));
          const viaOther = bySpan(await call(cb, structuredClone(entries), now));
          expect(viaOther).toEqual(viaMany);
        }
        expect(await state(b)).toEqual(await state(a));
      } finally {
        await ca.end();
        await cb.end();
        await pgdb.admin().query(`DROP SCHEMA ${a} CASCADE; DROP SCHEMA ${b} CASCADE`);
      }
    }),
    { numRuns: 40, examples },
  );
}

describe("PostgreSQL: agl_ingest_attempt_spans and agl_ingest_one_span", () => {
  let admin: pg.Client;
  beforeAll(() => {
    admin = pgdb.admin();
  });

  it("agl_ingest_attempt_spans answers and writes what agl_ingest_spans does for spans of one attempt (fast-check)", async () => {
    await agreesWithMany(callForOneAttempt, fc.array(batch, { minLength: 1, maxLength: 6 }));
  });

  it("agl_ingest_one_span answers and writes what agl_ingest_spans does for one span (fast-check)", async () => {
    // Runs of single spans: repeats of a span id (already stored), both kinds of sequence ids, the
    // counter's first move (no row yet) and its saturation.
    const single = batch.map((bt) => ({ ...bt, spans: bt.spans.slice(0, 1) }));
    // Always tried: a running attempt whose counter saturates on the third span.
    const nearMax: Setup = {
      config: { timeout_seconds: null, unresponsive_seconds: null },
      worker: false,
      before: "running",
      counter: MAX_SPAN_SEQUENCE_ID - 2,
    };
    const one = (id: Batch["spans"][number]["id"]): Batch => ({
      target: 0,
      attempt: 0,
      assign: true,
      spans: [{ id, seq: 0 }],
    });
    await agreesWithMany(
      (c, entries, now) => callForOneSpan(c, entries[0]!, now),
      fc.array(single, { minLength: 1, maxLength: 10 }),
      [[[nearMax], (["a", "b", "c", "d", "a"] as const).map(one)]],
    );
  });

  it("is what the store calls for spans of one attempt; other batches take agl_ingest_spans", async () => {
    const schema = pgdb.schema();
    const store = await PostgresLightningStore.connect(pgdb.url(), {
      schema,
      watchdog: false,
      listen: false,
    });
    const c = await clientOn(schema);
    const names: string[] = [];
    const spy: typeof c.query = ((config: { name?: string }, ...rest: unknown[]) => {
      names.push(config.name ?? "");
      return (c.query as (...args: unknown[]) => unknown)(config, ...rest);
    }) as typeof c.query;
    try {
      const r1 = await store.startRollout({ input: 1 });
      const r2 = await store.startRollout({ input: 2 });
      const s = (r: typeof r1, id: string, seq: number) =>
        testSpan(r.rollout_id, r.attempt.attempt_id, id, seq) as Span;
      const one = await ingestSpansAtOnce(
        { query: spy },
        [{ spans: [s(r1, "a", 0), s(r1, "b", 0)], assign: [true, true] }],
        5,
      );
      const many = await ingestSpansAtOnce(
        { query: spy },
        [{ spans: [s(r1, "c", 3)] }, { spans: [s(r2, "a", 4)] }],
        6,
      );
      const mixed = await ingestSpansAtOnce(
        { query: spy },
        [{ spans: [s(r2, "b", 0), s(r2, "c", 9)], assign: [true, false] }],
        7,
      );
      const single = await ingestSpansAtOnce({ query: spy }, [{ spans: [s(r1, "d", 0)], assign: [true] }], 8);
      const again = await ingestSpansAtOnce({ query: spy }, [{ spans: [s(r1, "d", 0)], assign: [true] }], 9);
      const missing = await ingestSpansAtOnce(
        { query: spy },
        [{ spans: [testSpan("no-such-rollout", "x", "e", 0) as Span], assign: [true] }],
        10,
      );
      expect(names).toEqual([
        "agl_ingest_attempt_spans",
        "agl_ingest_spans",
        "agl_ingest_spans",
        "agl_ingest_one_span",
        "agl_ingest_one_span",
        "agl_ingest_one_span",
      ]);
      expect(single?.results).toEqual([
        { ok: true, value: [expect.objectContaining({ span_id: "d", sequence_id: 4 })] },
      ]);
      // Already stored: nothing new, and not a reason for the general path.
      expect(again?.results).toEqual([{ ok: true, value: [] }]);
      expect(missing).toBeNull();
      expect(one?.results).toEqual([
        {
          ok: true,
          value: [
            expect.objectContaining({ span_id: "a", sequence_id: 1 }),
            expect.objectContaining({ span_id: "b", sequence_id: 2 }),
          ],
        },
      ]);
      expect(many?.results.map((x) => x.ok)).toEqual([true, true]);
      // Both kinds in one rollout: neither function covers it (the store allocates first).
      expect(mixed).toBeNull();
      const { rows } = await admin.query(
        `SELECT span_id, sequence_id, data->>'sequence_id' AS in_data FROM ${schema}.spans ORDER BY pk`,
      );
      expect(rows).toEqual([
        { span_id: "a", sequence_id: 1, in_data: "1" },
        { span_id: "b", sequence_id: 2, in_data: "2" },
        { span_id: "c", sequence_id: 3, in_data: "3" },
        { span_id: "a", sequence_id: 4, in_data: "4" },
        { span_id: "d", sequence_id: 4, in_data: "4" },
      ]);
    } finally {
      await c.end();
      await store.close();
    }
  });
});
