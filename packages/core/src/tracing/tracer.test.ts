import { trace as otelTrace } from "@opentelemetry/api";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { afterEach, describe, expect, it } from "vitest";
import { emitMessage } from "../emitters/emit.js";
import { emitReward } from "../emitters/reward.js";
import { type Logger, silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import type { LightningStore } from "../store/store.js";
import { currentRolloutTrace } from "./context.js";
import { LightningSpanProcessor } from "./span-processor.js";
import { LightningTracer } from "./tracer.js";

let store: InMemoryLightningStore;
afterEach(async () => store?.close());

function countingStore(inner: LightningStore, counts: Record<string, number>): LightningStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (typeof v !== "function") return v;
      return (...args: unknown[]) => {
        counts[String(prop)] = (counts[String(prop)] ?? 0) + 1;
        return v.apply(target, args);
      };
    },
  });
}

describe("LightningTracer", () => {
  it("stores spans with per-rollout sequence ids and the agentlightning resource keys", async () => {
    store = new InMemoryLightningStore();
    const tracer = new LightningTracer({ name: "test-tracer", logger: silentLogger });
    const r = await store.startRollout({ input: 1 });
    const t = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
    await t.run(async () => {
      emitMessage("a");
      await new Promise((res) => setTimeout(res, 5));
      emitMessage("b");
      emitReward(1);
    });
    await t.flush();
    const spans = (await store.querySpans(r.rollout_id)).items;
    expect(spans.map((s) => s.sequence_id)).toEqual([1, 2, 3]);
    expect(spans.map((s) => s.name)).toEqual([
      "agentlightning.message",
      "agentlightning.message",
      "agentlightning.annotation",
    ]);
    for (const s of spans) {
      expect(s.rollout_id).toBe(r.rollout_id);
      expect(s.attempt_id).toBe(r.attempt.attempt_id);
      expect(s.trace_id).toMatch(/^[0-9a-f]{32}$/);
      expect(s.span_id).toMatch(/^[0-9a-f]{16}$/);
      expect(s.resource.attributes).toMatchObject({
        "agentlightning.rollout_id": r.rollout_id,
        "agentlightning.attempt_id": r.attempt.attempt_id,
        "agentlightning.span_sequence_id": s.sequence_id,
        "agentlightning.tracer.name": "test-tracer",
      });
    }
    expect(t.spans().map((s) => s.span_id)).toEqual(spans.map((s) => s.span_id));
  });

  it("batches spans ended in the same tick into one sequence-id call and one write", async () => {
    store = new InMemoryLightningStore();
    const counts: Record<string, number> = {};
    const counted = countingStore(store, counts);
    const tracer = new LightningTracer({ logger: silentLogger });
    const r = await store.startRollout({ input: 1 });
    const t = tracer.traceAttempt({
      rolloutId: r.rollout_id,
      attemptId: r.attempt.attempt_id,
      store: counted,
    });
    t.run(() => {
      for (let i = 0; i < 20; i++) emitMessage(`m${i}`);
    });
    await t.flush();
    expect((await store.querySpans(r.rollout_id)).total).toBe(20);
    expect(counts.getManySpanSequenceIds).toBe(1);
    expect(counts.addManySpans).toBe(1);
  });

  it("never throws into the agent when the store fails; keeps spans and retries at flush", async () => {
    store = new InMemoryLightningStore();
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
    let failWrites = 1;
    const flaky = new Proxy(store, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (prop === "addManySpans") {
          return async (spans: any[]) => {
            if (failWrites-- > 0) throw new Error("store down");
            return target.addManySpans(spans);
          };
        }
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const tracer = new LightningTracer({ logger });
    const r = await store.startRollout({ input: 1 });
    const t = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store: flaky });
    t.run(() => emitMessage("x"));
    await new Promise((res) => setTimeout(res, 20));
    expect(warnings.some((w) => w.includes("could not store"))).toBe(true);
    expect(t.unsentSpans()).toHaveLength(1);
    expect((await store.querySpans(r.rollout_id)).total).toBe(0);
    await t.flush();
    expect(t.unsentSpans()).toHaveLength(0);
    expect((await store.querySpans(r.rollout_id)).total).toBe(1);
  });

  it("keeps concurrent rollouts apart", async () => {
    store = new InMemoryLightningStore();
    const tracer = new LightningTracer({ logger: silentLogger });
    const rollouts = await Promise.all(
      Array.from({ length: 20 }, (_, i) => store.startRollout({ input: i })),
    );
    await Promise.all(
      rollouts.map(async (r) => {
        const t = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
        await t.run(async () => {
          for (let k = 0; k < 3; k++) {
            await new Promise((res) => setTimeout(res, Math.random() * 5));
            emitMessage(`task-${r.input}`);
          }
          expect(currentRolloutTrace()).toBe(t);
        });
        await t.flush();
      }),
    );
    for (const r of rollouts) {
      const spans = (await store.querySpans(r.rollout_id)).items;
      expect(spans).toHaveLength(3);
      for (const s of spans) expect(s.attributes["agentlightning.message.body"]).toBe(`task-${r.input}`);
    }
  });

  it("validates its options naming the field", () => {
    expect(() => new LightningTracer({ name: "" })).toThrow(/tracer\.name/);
    expect(() => new LightningTracer({ spanProcessors: [{} as any] })).toThrow(/tracer\.spanProcessors\[0\]/);
    expect(() => new LightningTracer({ bogus: 1 } as any)).toThrow(/tracer\.bogus/);
  });

  it("does not touch the global provider, and a LightningSpanProcessor on the app's provider routes its spans", async () => {
    store = new InMemoryLightningStore();
    const before = otelTrace.getTracerProvider();
    const tracer = new LightningTracer({ logger: silentLogger });
    expect(otelTrace.getTracerProvider()).toBe(before);
    const appProvider = new BasicTracerProvider({ spanProcessors: [new LightningSpanProcessor()] });
    const appTracer = appProvider.getTracer("app");
    const r = await store.startRollout({ input: 1 });
    const t = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
    t.run(() => appTracer.startSpan("app.work").end());
    appTracer.startSpan("outside.rollout").end();
    await t.flush();
    const spans = (await store.querySpans(r.rollout_id)).items;
    expect(spans.map((s) => s.name)).toEqual(["app.work"]);
    await appProvider.shutdown();
  });
});
