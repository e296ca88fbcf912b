/**
 * Group commit on PostgreSQL: concurrent writes of one kind share transactions (rows written by one
 * transaction share its xmin), while each call keeps the outcome it would have had alone.
 */
import { NotFoundError } from "@agl/core";
import type pg from "pg";
import { beforeAll, describe, expect, it } from "vitest";
import { testSpan, usePgTestDatabase } from "../../../../test/support/pg-test-database.js";
import { PostgresLightningStore } from "./postgres-store.js";

const pgdb = usePgTestDatabase("gc");
let admin: pg.Client;
beforeAll(() => {
  admin = pgdb.admin();
});

async function openStore(): Promise<{ store: PostgresLightningStore; schema: string }> {
  const schema = pgdb.schema();
  return { store: await PostgresLightningStore.connect(pgdb.url(), { schema, poolSize: 4 }), schema };
}

/** Distinct transactions that wrote the rows of `table`. */
async function transactions(schema: string, table: string): Promise<number> {
  const { rows } = await admin.query(`SELECT COUNT(DISTINCT xmin::text)::int AS n FROM ${schema}.${table}`);
  return rows[0].n;
}

const span = testSpan;

describe("PostgreSQL group commit", () => {
  it("concurrent start_rollout, add_span and update_attempt calls share commits, each with its own result", async () => {
    const { store, schema } = await openStore();
    try {
      const n = 40;
      const started = await Promise.all(
        Array.from({ length: n }, (_, i) => store.startRollout({ input: { i } })),
      );
      expect(new Set(started.map((r) => r.rollout_id)).size).toBe(n);
      expect(started.map((r) => r.input)).toEqual(started.map((_, i) => ({ i })));
      // Written one call per transaction, that would be 40 each.
      expect(await transactions(schema, "rollouts")).toBeLessThanOrEqual(4);

      const stored = await Promise.all(
        started.map((r, i) => store.addSpan(span(r.rollout_id, r.attempt.attempt_id, `s${i}`))),
      );
      expect(stored.map((s) => s?.span_id)).toEqual(started.map((_, i) => `s${i}`));
      expect(await transactions(schema, "spans")).toBeLessThanOrEqual(4);

      const attempts = await Promise.all(
        started.map((r) => store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" })),
      );
      expect(attempts.every((a) => a.status === "succeeded")).toBe(true);
      const done = await store.queryRollouts({ statusIn: ["succeeded"], limit: 1 });
      expect(done.total).toBe(n);
    } finally {
      await store.close();
    }
  });

  it("a call naming a missing rollout or attempt fails alone; the rest of its batch is stored", async () => {
    const { store } = await openStore();
    try {
      const rs = await Promise.all(Array.from({ length: 6 }, (_, i) => store.startRollout({ input: i })));
      const calls = [
        ...rs.map((r, i) => store.addSpan(span(r.rollout_id, r.attempt.attempt_id, `ok${i}`))),
        store.addSpan(span("ro-missing", "at-x", "bad1")),
        store.addSpan(span(rs[0]!.rollout_id, "at-missing", "bad2")),
        // A span repeated across calls of one batch is stored once, for the first call.
        store.addSpan(span(rs[1]!.rollout_id, rs[1]!.attempt.attempt_id, "ok1")),
      ];
      const settled = await Promise.allSettled(calls);
      expect(settled.slice(0, 6).every((s) => s.status === "fulfilled" && s.value !== null)).toBe(true);
      const bad1 = settled[6] as PromiseRejectedResult;
      const bad2 = settled[7] as PromiseRejectedResult;
      expect(NotFoundError.isInstance(bad1.reason) && bad1.reason.message).toBe(
        "Rollout ro-missing not found",
      );
      expect(NotFoundError.isInstance(bad2.reason) && bad2.reason.message).toBe(
        `Attempt at-missing not found for rollout ${rs[0]!.rollout_id}`,
      );
      expect(settled[8]).toEqual({ status: "fulfilled", value: null });
      for (const [i, r] of rs.entries()) {
        const spans = (await store.querySpans(r.rollout_id)).items;
        expect(spans.map((s) => s.span_id)).toEqual([`ok${i}`]);
        // The first span made the attempt and the rollout running.
        expect((await store.getRolloutById(r.rollout_id))?.status).toBe("running");
      }
    } finally {
      await store.close();
    }
  });

  it("updates of one rollout apply in call order; a refused transition fails only its call", async () => {
    const { store } = await openStore();
    try {
      const a = await store.startRollout({ input: "a" });
      const b = await store.startRollout({ input: "b" });
      const [hb, done, again, other] = await Promise.allSettled([
        store.updateAttempt(a.rollout_id, "latest", { last_heartbeat_time: 123 }),
        store.updateAttempt(a.rollout_id, "latest", { status: "succeeded" }),
        // After success this would move a finished attempt back: refused.
        store.updateAttempt(a.rollout_id, "latest", { status: "running" }),
        store.updateAttempt(b.rollout_id, "latest", { status: "failed" }),
      ]);
      expect(hb.status === "fulfilled" && hb.value.status).toBe("running");
      expect(done.status === "fulfilled" && done.value.status).toBe("succeeded");
      expect(done.status === "fulfilled" && done.value.last_heartbeat_time).toBe(123);
      expect(other.status === "fulfilled" && other.value.status).toBe("failed");
      const latest = await store.getLatestAttempt(a.rollout_id);
      if (again.status === "rejected") expect(latest?.status).toBe("succeeded");
      else expect(latest?.status).toBe(again.value.status);
      expect((await store.getRolloutById(b.rollout_id))?.status).toBe("failed");
    } finally {
      await store.close();
    }
  });

  it("concurrent sequence reservations of one rollout get disjoint blocks covering 1..N", async () => {
    const { store } = await openStore();
    try {
      const r = await store.startRollout({ input: null });
      const sizes = Array.from({ length: 30 }, (_, i) => (i % 4) + 1);
      const blocks = await Promise.all(
        sizes.map((k) =>
          store.getManySpanSequenceIds(
            Array.from({ length: k }, () => [r.rollout_id, r.attempt.attempt_id] as const),
          ),
        ),
      );
      blocks.forEach((ids, i) => {
        expect(ids).toHaveLength(sizes[i]!);
        expect(ids).toEqual(ids.map((_, j) => ids[0]! + j));
      });
      const all = blocks.flat().sort((x, y) => x - y);
      const total = sizes.reduce((x, y) => x + y, 0);
      expect(all).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    } finally {
      await store.close();
    }
  });
});
