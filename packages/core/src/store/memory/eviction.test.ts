import { InvalidArgumentError, SpansEvictedError } from "@agl/core";
import { expectError, makeSpan } from "@agl/core/testing";
import { afterEach, describe, expect, it } from "vitest";
import type { AttemptedRollout } from "../../types/rollout.js";
import { InMemoryLightningStore, type InMemoryLightningStoreOptions } from "../memory-store.js";

describe("InMemoryLightningStore span eviction", () => {
  const stores: InMemoryLightningStore[] = [];
  const open = (options: InMemoryLightningStoreOptions) => {
    const store = new InMemoryLightningStore(options);
    stores.push(store);
    return store;
  };
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  const seq = new Map<string, number>();
  const addSpans = async (store: InMemoryLightningStore, r: AttemptedRollout, n: number, extra = {}) => {
    for (let i = 0; i < n; i++) {
      const next = (seq.get(r.rollout_id) ?? 0) + 1;
      seq.set(r.rollout_id, next);
      await store.addSpan(makeSpan(r.attempt, next, extra));
    }
  };
  const finish = (store: InMemoryLightningStore, r: AttemptedRollout) =>
    store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
  const spanCount = async (store: InMemoryLightningStore, r: AttemptedRollout) =>
    (await store.querySpans(r.rollout_id)).total;

  it("validates its options, naming the field", () => {
    const fieldOf = (spanEviction: unknown): string => {
      try {
        new InMemoryLightningStore({ spanEviction } as InMemoryLightningStoreOptions);
      } catch (error) {
        if (InvalidArgumentError.isInstance(error)) return error.field;
        throw error;
      }
      throw new Error("accepted");
    };
    expect(fieldOf({ maxSpans: 0 })).toBe("options.spanEviction.maxSpans");
    expect(fieldOf({ maxSpans: 1.5 })).toBe("options.spanEviction.maxSpans");
    expect(fieldOf({ maxSpanBytes: -1 })).toBe("options.spanEviction.maxSpanBytes");
    expect(fieldOf({ maxSpans: 10, safeRatio: 1.5 })).toBe("options.spanEviction.safeRatio");
    expect(fieldOf({ maxSpans: 10, safeRatio: 0 })).toBe("options.spanEviction.safeRatio");
    expect(fieldOf({})).toBe("options.spanEviction.maxSpans");
    expect(fieldOf({ maxSpans: 10, maxHeap: 1 })).toBe("options.spanEviction");
  });

  it("is off by default and reports no eviction figures", async () => {
    const store = open({});
    const r = await store.startRollout({ input: 1 });
    await addSpans(store, r, 3);
    await finish(store, r);
    const stats = await store.statistics();
    expect(stats.total_spans).toBe(3);
    expect(stats.evicted_spans).toBeUndefined();
  });

  it("drops the spans of the oldest terminal rollouts (by creation) until under safeRatio × maxSpans", async () => {
    const store = open({ spanEviction: { maxSpans: 10, safeRatio: 0.5 } });
    const [a, b, c, d] = [
      await store.startRollout({ input: "a" }),
      await store.startRollout({ input: "b" }),
      await store.startRollout({ input: "c" }),
      await store.startRollout({ input: "d" }),
    ] as AttemptedRollout[];
    for (const r of [a, b, c]) await addSpans(store, r!, 3);
    // Finished in another order than created: age is creation order.
    for (const r of [c, a, b]) await finish(store, r!);
    expect((await store.statistics()).evicted_spans).toBe(0);
    await addSpans(store, d!, 2); // 11 > 10: evict a (8 left), then b (5 <= 5), then stop
    const stats = await store.statistics();
    expect(stats).toMatchObject({ total_spans: 5, evicted_spans: 6, evicted_rollouts: 2 });
    await expectError(store.querySpans(a!.rollout_id), SpansEvictedError);
    const error = await expectError<SpansEvictedError>(
      store.querySpans(b!.rollout_id, { attemptId: "latest" }),
      SpansEvictedError,
    );
    expect(error).toMatchObject({ rolloutId: b!.rollout_id, attemptId: b!.attempt.attempt_id });
    expect(await spanCount(store, c!)).toBe(3);
    expect(await spanCount(store, d!)).toBe(2);
  });

  it("never drops a running rollout's spans; it stays over the limit until rollouts finish", async () => {
    const store = open({ spanEviction: { maxSpans: 4, safeRatio: 0.5 } });
    const running = await store.startRollout({ input: "running" });
    const done = await store.startRollout({ input: "done" });
    await addSpans(store, done, 1);
    await finish(store, done);
    await addSpans(store, running, 6); // 5 > 4: only `done` may go; then nothing is evictable
    expect(await spanCount(store, running)).toBe(6);
    expect(await store.statistics()).toMatchObject({ total_spans: 6, evicted_spans: 1, evicted_rollouts: 1 });
    // Once it finishes, the next write evicts it (the oldest terminal one).
    await finish(store, running);
    const next = await store.startRollout({ input: "next" });
    await addSpans(store, next, 1);
    await expectError(store.querySpans(running.rollout_id), SpansEvictedError);
    expect(await spanCount(store, next)).toBe(1);
    expect(await store.statistics()).toMatchObject({ total_spans: 1, evicted_spans: 7, evicted_rollouts: 2 });
  });

  it("discards late spans of an evicted attempt; a retry's new attempt keeps its own", async () => {
    const store = open({ spanEviction: { maxSpans: 2, safeRatio: 0.5 } });
    const old = await store.startRollout({ input: "old" });
    await addSpans(store, old, 1);
    await finish(store, old);
    const other = await store.startRollout({ input: "other" });
    await addSpans(store, other, 2); // 3 > 2: evict `old`
    expect(await store.addSpan(makeSpan(old.attempt, 99))).toBeNull();
    expect((await store.statistics()).discarded_late_spans).toBe(1);
    const retry = await store.startAttempt(old.rollout_id);
    await store.addSpan(makeSpan(retry.attempt, 100));
    expect((await store.querySpans(old.rollout_id, { attemptId: "latest" })).total).toBe(1);
    // Every attempt together would be partial: still an error.
    await expectError(store.querySpans(old.rollout_id), SpansEvictedError);
  });

  it("evicts by estimated span bytes too", async () => {
    const store = open({ spanEviction: { maxSpanBytes: 5_000, safeRatio: 0.5 } });
    const big = { attributes: { payload: "x".repeat(1_000) } };
    const a = await store.startRollout({ input: "a" });
    const b = await store.startRollout({ input: "b" });
    const c = await store.startRollout({ input: "c" });
    await addSpans(store, a, 2, big);
    await addSpans(store, b, 2, big);
    await finish(store, a);
    await finish(store, b);
    expect((await store.statistics()).evicted_spans).toBe(0);
    await addSpans(store, c, 1, big); // ~5.5 kB > 5 kB: evict a (~3.3 kB > 2.5 kB), then b
    const stats = await store.statistics();
    expect(stats).toMatchObject({ total_spans: 1, evicted_spans: 4, evicted_rollouts: 2 });
    expect(stats.span_bytes as number).toBeGreaterThan(1_000);
    expect(stats.span_bytes as number).toBeLessThanOrEqual(2_500);
    await expectError(store.querySpans(b.rollout_id), SpansEvictedError);
    expect(await spanCount(store, c)).toBe(1);
  });
});
