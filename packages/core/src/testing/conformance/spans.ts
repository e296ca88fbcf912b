import { describe, expect, it } from "vitest";
import { InvalidArgumentError, NotFoundError } from "../../errors.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, makeReadableSpan, makeSpan, withStore } from "../helpers.js";

export function spanTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("span sequence ids", () => {
    test("next=1, addOtelSpan takes 2, next=3", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const { rollout_id: rid, attempt_id: aid } = r.attempt;
      expect(await store.getNextSpanSequenceId(rid, aid)).toBe(1);
      const otel = await store.addOtelSpan(rid, aid, makeReadableSpan("agent.step", { k: "v", n: 3 }));
      expect(otel?.sequence_id).toBe(2);
      expect(await store.getNextSpanSequenceId(rid, aid)).toBe(3);
    });

    test("the counter is per rollout, continues across attempts, and ids are not validated", async (store) => {
      const a = await store.startRollout({ input: 1 });
      const b = await store.startRollout({ input: 2 });
      expect(await store.getNextSpanSequenceId(a.rollout_id, a.attempt.attempt_id)).toBe(1);
      expect(await store.getNextSpanSequenceId(a.rollout_id, a.attempt.attempt_id)).toBe(2);
      expect(await store.getNextSpanSequenceId(b.rollout_id, b.attempt.attempt_id)).toBe(1);
      const a2 = await store.startAttempt(a.rollout_id);
      expect(await store.getNextSpanSequenceId(a.rollout_id, a2.attempt.attempt_id)).toBe(3);
      expect(await store.getNextSpanSequenceId("ro-unknown", "at-unknown")).toBe(1);
      expect(await store.getNextSpanSequenceId("ro-unknown", "at-other")).toBe(2);
    });

    test("explicit sequence ids bump the counter; bulk allocation is consecutive", async (store) => {
      const a = await store.startRollout({ input: 1 });
      const b = await store.startRollout({ input: 2 });
      await store.addSpan(makeSpan(a.attempt, 10));
      await store.addSpan(makeSpan(a.attempt, 4)); // lower values never move it back
      expect(await store.getNextSpanSequenceId(a.rollout_id, a.attempt.attempt_id)).toBe(11);
      const many = await store.getManySpanSequenceIds([
        [a.rollout_id, a.attempt.attempt_id],
        [b.rollout_id, b.attempt.attempt_id],
        [a.rollout_id, a.attempt.attempt_id],
      ]);
      expect(many).toEqual([12, 1, 13]);
      await store.addManySpans([makeSpan(b.attempt, 7), makeSpan(b.attempt, 5)]);
      expect(await store.getNextSpanSequenceId(b.rollout_id, b.attempt.attempt_id)).toBe(8);
      const otel = await store.addOtelSpan(b.rollout_id, b.attempt.attempt_id, makeReadableSpan(), 20);
      expect(otel?.sequence_id).toBe(20);
      expect(await store.getNextSpanSequenceId(b.rollout_id, b.attempt.attempt_id)).toBe(21);
    });
  });

  describe("spans", () => {
    test("a duplicate (rollout, attempt, span_id) returns null; other attempts may reuse the id", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const span = makeSpan(r.attempt, 1, { span_id: "00000000000000aa" });
      const stored = await store.addSpan(span);
      expect(stored?.span_id).toBe("00000000000000aa");
      expect(await store.addSpan({ ...span, sequence_id: 2, name: "again" })).toBeNull();
      const r2 = await store.startAttempt(r.rollout_id);
      expect(
        await store.addSpan({ ...span, attempt_id: r2.attempt.attempt_id, sequence_id: 3 }),
      ).not.toBeNull();
      const all = await store.querySpans(r.rollout_id);
      expect(all.total).toBe(2);
      expect(all.items[0]!.name).toBe("test.span");
      const bulk = await store.addManySpans([span, makeSpan(r.attempt, 4), makeSpan(r.attempt, 5)]);
      expect(bulk.map((s) => s.sequence_id)).toEqual([4, 5]);
      expect((await store.querySpans(r.rollout_id)).total).toBe(4);
    });

    test("a span for a missing rollout or attempt raises NotFoundError; a bad bulk stores nothing", async (store) => {
      const r = await store.startRollout({ input: 1 });
      await expectError(
        store.addSpan(makeSpan({ rollout_id: "ro-nope", attempt_id: "at-nope" }, 1)),
        NotFoundError,
      );
      await expectError(
        store.addSpan(makeSpan({ rollout_id: r.rollout_id, attempt_id: "at-00000000" }, 1)),
        NotFoundError,
      );
      await expectError(
        store.addManySpans([
          makeSpan(r.attempt, 1),
          makeSpan({ rollout_id: r.rollout_id, attempt_id: "at-0" }, 2),
        ]),
        NotFoundError,
      );
      await expectError(store.addOtelSpan("ro-nope", "at-nope", makeReadableSpan()), NotFoundError);
      expect((await store.querySpans(r.rollout_id)).total).toBe(0);
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("preparing");
    });

    test("a malformed span raises InvalidArgumentError naming the field", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const bad = { ...makeSpan(r.attempt, 1), sequence_id: "one" } as any;
      const err = await expectError<InvalidArgumentError>(store.addSpan(bad), InvalidArgumentError);
      expect(err.field).toContain("sequence_id");
    });

    test("spans round-trip every field, unknown keys included", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const span = makeSpan(r.attempt, 1, {
        name: "openai.chat.completion",
        parent_id: "00000000000000ff",
        attributes: { "gen_ai.request.model": "m", list: [1, 2], nested: { a: { b: true } } },
        status: { status_code: "ERROR", description: "boom" },
        events: [{ name: "e", attributes: { x: 1 }, timestamp: 1.5 }],
        links: [
          {
            context: { trace_id: "t", span_id: "s", is_remote: true, trace_state: { a: "b" } },
            attributes: null,
          },
        ],
        context: {
          trace_id: "0af7651916cd43dd8448eb211c80319c",
          span_id: "x",
          is_remote: false,
          trace_state: {},
        },
        parent: null,
        resource: { attributes: { "service.name": "svc" }, schema_url: "https://x" },
        custom_extension: { keep: ["me", 1] },
      });
      await store.addSpan(span);
      const [got] = (await store.querySpans(r.rollout_id)).items;
      expect(got).toMatchObject(span as Record<string, unknown>);
      expect((got as Record<string, unknown>).custom_extension).toEqual({ keep: ["me", 1] });
    });

    test("addOtelSpan converts an OpenTelemetry span", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const readable = makeReadableSpan("llm.call", { "gen_ai.system": "openai", tokens: 5 });
      const stored = await store.addOtelSpan(r.rollout_id, r.attempt.attempt_id, readable);
      expect(stored).not.toBeNull();
      expect(stored!.name).toBe("llm.call");
      expect(stored!.trace_id).toBe(readable.spanContext().traceId);
      expect(stored!.span_id).toBe(readable.spanContext().spanId);
      expect(stored!.attributes).toMatchObject({ "gen_ai.system": "openai", tokens: 5 });
      expect(stored!.events.map((e) => e.name)).toEqual(["evt"]);
      expect(stored!.start_time).toBeGreaterThan(1e9);
      expect(stored!.end_time).toBeGreaterThanOrEqual(stored!.start_time!);
      expect(stored!.status.status_code).toBe("UNSET");
      expect(await store.addOtelSpan(r.rollout_id, r.attempt.attempt_id, readable)).toBeNull();
      expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("running");
    });

    test("querySpans filters by attempt ('latest' included), ids and names, and sorts by sequence", async (store) => {
      const r = await store.startRollout({ input: 1 });
      expect((await store.querySpans(r.rollout_id, { attemptId: "latest" })).total).toBe(0);
      await store.addSpan(makeSpan(r.attempt, 2, { name: "reward", span_id: "000000000000000b" }));
      await store.addSpan(makeSpan(r.attempt, 1, { name: "llm.call", span_id: "000000000000000a" }));
      const r2 = await store.startAttempt(r.rollout_id);
      await store.addSpan(
        makeSpan(r2.attempt, 3, { name: "llm.retry", span_id: "000000000000000c", parent_id: "p1" }),
      );

      const all = await store.querySpans(r.rollout_id);
      expect(all.items.map((s) => s.sequence_id)).toEqual([1, 2, 3]);
      const first = await store.querySpans(r.rollout_id, { attemptId: r.attempt.attempt_id });
      expect(first.items.map((s) => s.name)).toEqual(["llm.call", "reward"]);
      const latest = await store.querySpans(r.rollout_id, { attemptId: "latest" });
      expect(latest.items.map((s) => s.name)).toEqual(["llm.retry"]);
      expect((await store.querySpans(r.rollout_id, { nameContains: "llm" })).total).toBe(2);
      expect((await store.querySpans(r.rollout_id, { name: "reward" })).total).toBe(1);
      expect((await store.querySpans(r.rollout_id, { spanId: "000000000000000a" })).items[0]!.name).toBe(
        "llm.call",
      );
      expect((await store.querySpans(r.rollout_id, { parentId: "p1" })).total).toBe(1);
      const either = await store.querySpans(r.rollout_id, {
        name: "reward",
        parentId: "p1",
        filterLogic: "or",
      });
      expect(either.items.map((s) => s.name)).toEqual(["reward", "llm.retry"]);
      const both = await store.querySpans(r.rollout_id, { name: "reward", parentId: "p1" });
      expect(both.total).toBe(0);
      // The attempt is always ANDed, even with "or".
      const orLatest = await store.querySpans(r.rollout_id, {
        attemptId: "latest",
        name: "reward",
        nameContains: "retry",
        filterLogic: "or",
      });
      expect(orLatest.items.map((s) => s.name)).toEqual(["llm.retry"]);
      const desc = await store.querySpans(r.rollout_id, {
        sortBy: "sequence_id",
        sortOrder: "desc",
        limit: 2,
      });
      expect(desc.items.map((s) => s.sequence_id)).toEqual([3, 2]);
      expect(desc.total).toBe(3);
      expect((await store.querySpans("ro-missing")).total).toBe(0);
    });
  });
}
