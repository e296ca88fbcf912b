import { describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../../errors.js";
import {
  MAX_DEQUEUE_LIMIT,
  MAX_ENQUEUE_BATCH,
  MAX_IDS_PER_CALL,
  MAX_NESTING_DEPTH,
  MAX_SPAN_SEQUENCE_ID,
} from "../../types/input-rules.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, makeReadableSpan, makeSpan, withStore } from "../helpers.js";

const NUL = "a\u0000b";
const LONE_SURROGATE = "a\ud800b";

/** `{k: {k: ... "leaf"}}`, `depth` objects deep. */
export function nested(depth: number): unknown {
  let value: unknown = "leaf";
  for (let i = 0; i < depth; i++) value = { k: value };
  return value;
}

/**
 * The input rules (types/input-rules.ts) are the same on every backend: what PostgreSQL cannot store,
 * integers outside the columns' range, ids URL normalisation would rewrite, deep nesting. Each is an
 * InvalidArgumentError naming the field, on writes and on reads, and never breaks later calls.
 */
export function inputRuleTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));
  const field = async (p: Promise<unknown>) =>
    (await expectError<InvalidArgumentError>(p, InvalidArgumentError)).field;

  describe("input rules", () => {
    test("NUL characters and lone surrogates are rejected in values, keys and ids (spans: sanitize.ts)", async (store) => {
      expect(await field(store.enqueueRollout({ input: { text: NUL } }))).toContain("input");
      expect(await field(store.enqueueRollout({ input: [LONE_SURROGATE] }))).toContain("input");
      expect(await field(store.enqueueRollout({ input: 1, metadata: { [NUL]: 1 } }))).toContain("metadata");
      expect(await field(store.getRolloutById(`ro-${NUL}`))).toContain("rollout_id");
      expect(await field(store.getRolloutById(`ro-${LONE_SURROGATE}`))).toContain("rollout_id");
      expect(await field(store.queryAttempts(`ro-${NUL}`))).toContain("rollout_id");
      expect(await field(store.getWorkerById(NUL))).toContain("worker_id");
      expect(await field(store.updateWorker("w", { heartbeat_stats: { cpu: NUL } }))).toContain(
        "heartbeat_stats",
      );
      expect(await field(store.queryRollouts({ rolloutIdContains: NUL }))).toMatch(
        /rollout_?[iI]d_?contains/i,
      );
      const r = await store.startRollout({ input: 1 });
      expect(await field(store.addSpan(makeSpan(r.attempt, 1, { rollout_id: `ro-${NUL}` })))).toContain(
        "rollout_id",
      );
      expect(await field(store.updateAttempt(r.rollout_id, "latest", { metadata: { e: NUL } }))).toContain(
        "metadata",
      );
      // Nothing bad was stored, and the store still works (span text is sanitised instead: sanitize.ts).
      expect((await store.querySpans(r.rollout_id)).items).toHaveLength(0);
      expect((await store.queryRollouts()).total).toBe(1);
      expect(await store.getManySpanSequenceIds([[r.rollout_id, r.attempt.attempt_id]])).toEqual([1]);
    });

    test("ids '.' and '..' and ids with control characters are invalid", async (store) => {
      for (const id of [".", ".."]) {
        expect(await field(store.getRolloutById(id))).toContain("rollout_id");
        expect(await field(store.getResourcesById(id))).toContain("resources_id");
        expect(await field(store.updateResources(id, {}))).toContain("resources_id");
        expect(await field(store.updateWorker(id))).toContain("worker_id");
      }
      expect(await field(store.getLatestAttempt("ro\n1"))).toContain("rollout_id");
      expect(await field(store.getRolloutById("x".repeat(600)))).toContain("rollout_id");
      // Dots inside an id are fine.
      expect(await store.getRolloutById("ro-1.2")).toBeNull();
      expect(await store.getRolloutById("...")).toBeNull();
    });

    test("span sequence ids stay in every store's integer range; allocation saturates at the maximum", async (store) => {
      const r = await store.startRollout({
        input: 1,
        config: { max_attempts: 2, retry_condition: ["failed"] },
      });
      const pair = [r.rollout_id, r.attempt.attempt_id] as const;
      for (const seq of [2 ** 31 - 1, 2 ** 53 - 1, MAX_SPAN_SEQUENCE_ID + 1, -1]) {
        expect(await field(store.addSpan(makeSpan(r.attempt, seq)))).toContain("sequence_id");
      }
      await store.addSpan(makeSpan(r.attempt, MAX_SPAN_SEQUENCE_ID - 1));
      expect(await store.getManySpanSequenceIds([pair, pair, pair])).toEqual([
        MAX_SPAN_SEQUENCE_ID,
        MAX_SPAN_SEQUENCE_ID,
        MAX_SPAN_SEQUENCE_ID,
      ]);
      // The documented maximum given explicitly: what the store hands out next is still accepted.
      await store.addSpan(makeSpan(r.attempt, MAX_SPAN_SEQUENCE_ID));
      const next = await store.getNextSpanSequenceId(...pair);
      expect(next).toBe(MAX_SPAN_SEQUENCE_ID);
      const batch = await store.getManySpanSequenceIds(Array.from({ length: 50 }, () => pair));
      expect(new Set(batch)).toEqual(new Set([MAX_SPAN_SEQUENCE_ID]));
      const stored = await store.addManySpans([makeSpan(r.attempt, next), makeSpan(r.attempt, batch[49]!)]);
      expect(stored.map((s) => s.sequence_id)).toEqual([MAX_SPAN_SEQUENCE_ID, MAX_SPAN_SEQUENCE_ID]);
      const otel = await store.addOtelSpan(r.rollout_id, r.attempt.attempt_id, makeReadableSpan());
      expect(otel?.sequence_id).toBe(MAX_SPAN_SEQUENCE_ID);
      // Many full batches later the counter has not overflowed any column, and the rollout finishes.
      for (let i = 0; i < 3; i++) {
        const ids = await store.getManySpanSequenceIds(Array.from({ length: MAX_IDS_PER_CALL }, () => pair));
        expect(ids.every((id) => id === MAX_SPAN_SEQUENCE_ID)).toBe(true);
      }
      await store.addSpan(makeSpan(r.attempt, await store.getNextSpanSequenceId(...pair)));
      await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
      expect((await store.querySpans(r.rollout_id)).total).toBe(6);
      // Other rollouts keep their own counters.
      const other = await store.startRollout({ input: 2 });
      expect(await store.getNextSpanSequenceId(other.rollout_id, other.attempt.attempt_id)).toBe(1);
    });

    test("integer ranges: dequeue batch size (clamped), query paging, max_attempts", async (store) => {
      expect(await store.dequeueManyRollouts({ limit: MAX_DEQUEUE_LIMIT + 1 })).toEqual([]);
      expect(await field(store.dequeueManyRollouts({ limit: 1.5 }))).toContain("limit");
      expect(await field(store.queryRollouts({ limit: 2 ** 40 }))).toContain("limit");
      expect(await field(store.queryRollouts({ offset: 2 ** 40 }))).toContain("offset");
      expect(await field(store.enqueueRollout({ input: 1, config: { max_attempts: 2 ** 40 } }))).toContain(
        "max_attempts",
      );
      expect(await store.dequeueManyRollouts({ limit: MAX_DEQUEUE_LIMIT })).toEqual([]);
      const tooMany = Array.from({ length: MAX_ENQUEUE_BATCH + 1 }, () => ({ input: 1 }));
      // "requests" in process, "rollouts" (the body key) through the HTTP client.
      expect(await field(store.enqueueManyRollouts(tooMany))).toMatch(/^(requests|rollouts)$/);
      expect((await store.queryRollouts({})).total).toBe(0);
    });

    test("a dequeue limit above the maximum is clamped to it, never refused", async (store) => {
      await store.enqueueManyRollouts(
        Array.from({ length: MAX_DEQUEUE_LIMIT + 2 }, (_, i) => ({ input: i })),
      );
      expect(await store.dequeueManyRollouts({ limit: 2 ** 40 })).toHaveLength(MAX_DEQUEUE_LIMIT);
      expect(await store.dequeueManyRollouts({ limit: MAX_DEQUEUE_LIMIT + 1 })).toHaveLength(2);
    });

    test("values nest at most MAX_NESTING_DEPTH levels", async (store) => {
      const ok = await store.enqueueRollout({ input: nested(MAX_NESTING_DEPTH - 1) });
      expect((await store.getRolloutById(ok.rollout_id))?.input).toEqual(nested(MAX_NESTING_DEPTH - 1));
      expect(await field(store.enqueueRollout({ input: nested(MAX_NESTING_DEPTH + 1) }))).toContain("input");
      expect(await field(store.enqueueRollout({ input: nested(5000) }))).toContain("input");
      const r = await store.startRollout({ input: 1 });
      expect(
        await field(store.addSpan(makeSpan(r.attempt, 1, { attributes: { deep: nested(5000) } as any }))),
      ).toContain("attributes");
    });
  });
}
