import { InMemoryLightningStore } from "@agl/core";
import { describe, expect, it } from "vitest";
import { SpanWriter } from "./span-writer.js";

const span = (rollout_id: string, attempt_id: string, sequence_id: number, span_id: string) => ({
  rollout_id,
  attempt_id,
  sequence_id,
  trace_id: "t".repeat(32),
  span_id,
  name: "openai.chat.completion",
});

describe("SpanWriter", () => {
  it("hands out sequence ids in request order, batched", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const r = await store.startRollout({ input: 1 });
    let batches = 0;
    const getMany = store.getManySpanSequenceIds.bind(store);
    store.getManySpanSequenceIds = (pairs) => {
      batches++;
      return getMany(pairs);
    };
    const writer = new SpanWriter(store, { warn() {}, error() {} });
    const ids = await Promise.all(
      Array.from({ length: 10 }, () => writer.nextSequenceId(r.rollout_id, r.attempt.attempt_id)),
    );
    expect(ids).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(batches).toBe(1);
    await store.close();
  });

  it("stores the good spans of a batch the store rejects for one bad span, and reports the bad one", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const r = await store.startRollout({ input: 1 });
    const writer = new SpanWriter(store, { warn() {}, error() {} });
    const results = await Promise.all([
      writer.write(span(r.rollout_id, r.attempt.attempt_id, 1, "a")),
      writer.write(span("ro-unknown", "at-unknown", 1, "b")),
      writer.write(span(r.rollout_id, r.attempt.attempt_id, 2, "c")),
    ]);
    const stored = (await store.querySpans(r.rollout_id)).items.map((s) => s.span_id);
    expect(stored).toEqual(["a", "c"]);
    expect(results[0]).toBeNull();
    expect(results[1]).toMatch(/ro-unknown/);
    expect(results[2]).toBeNull();
    await store.close();
  });
});
