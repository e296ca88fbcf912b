import { afterEach, describe, expect, it } from "vitest";
import { emitMessage } from "../emitters/emit.js";
import { emitReward } from "../emitters/reward.js";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import type { LightningStore } from "../store/store.js";
import type { Span } from "../types/span.js";
import { LightningTracer } from "./tracer.js";

let store: InMemoryLightningStore;
afterEach(async () => store?.close());

type Fault = "seq" | "write";

/**
 * The store, with its span calls failing on demand: `failNext[kind]` calls of that kind fail, and a
 * write can be held (`holdWrites`) so a test decides when it lands relative to `flush()`.
 */
function faultyStore(inner: LightningStore) {
  const failNext: Record<Fault, number> = { seq: 0, write: 0 };
  let release: (() => void) | undefined;
  let holdNext = false;
  const held: Promise<void>[] = [];
  const proxy = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop === "getManySpanSequenceIds") {
        return async (...args: unknown[]) => {
          if (failNext.seq > 0) {
            failNext.seq--;
            throw new Error("store unreachable (sequence ids)");
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      if (prop === "addManySpans") {
        return async (...args: unknown[]) => {
          if (holdNext) {
            holdNext = false;
            const gate = new Promise<void>((r) => {
              release = r;
            });
            held.push(gate);
            await gate;
          }
          if (failNext.write > 0) {
            failNext.write--;
            throw new Error("store unreachable (write)");
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      }
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    store: proxy,
    failNext,
    holdNextWrite: () => {
      holdNext = true;
    },
    releaseWrite: () => release?.(),
    get heldWrites() {
      return held.length;
    },
  };
}

async function attemptOf(s: LightningStore) {
  const r = await s.startRollout({ input: 1 });
  return { rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id };
}

const tick = () => new Promise((r) => setImmediate(r));

/** `inner` with its addManySpans wrapped: `wrap` gets the spans and the real call. */
function wrapWrites(
  inner: LightningStore,
  wrap: (spans: Span[], write: (spans: Span[]) => Promise<Span[]>) => Promise<Span[]>,
): LightningStore {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (prop !== "addManySpans") return typeof value === "function" ? value.bind(target) : value;
      return (spans: Span[]) => wrap(spans, (s) => target.addManySpans(s));
    },
  });
}

describe("RolloutTrace.flush", () => {
  it("resends a write that fails while flush is waiting for it", async () => {
    store = new InMemoryLightningStore();
    const f = faultyStore(store);
    const ids = await attemptOf(store);
    const tracer = new LightningTracer({ logger: silentLogger });
    const t = tracer.traceAttempt({ ...ids, store: f.store, retryDelaysMs: [0, 0] });
    f.holdNextWrite();
    f.failNext.write = 1;
    t.run(() => {
      emitMessage("hello");
      emitReward(1);
    });
    // Let the background drain reach the held write, then flush while it is in flight.
    while (f.heldWrites === 0) await tick();
    const flushed = t.flush();
    await tick();
    f.releaseWrite();
    await flushed;
    const stored = (await store.querySpans(ids.rolloutId)).items;
    expect(stored.map((s) => s.name)).toEqual(["agentlightning.message", "agentlightning.annotation"]);
    expect(t.unacknowledgedCount).toBe(0);
  });

  it("keeps spans that could not get a sequence id and stores them once the store answers", async () => {
    store = new InMemoryLightningStore();
    const f = faultyStore(store);
    const ids = await attemptOf(store);
    const tracer = new LightningTracer({ logger: silentLogger });
    const t = tracer.traceAttempt({ ...ids, store: f.store, retryDelaysMs: [0, 0, 0] });
    // The background drain and flush's first round both fail to get sequence ids.
    f.failNext.seq = 2;
    t.run(() => emitReward(0.5));
    await t.flush();
    const stored = (await store.querySpans(ids.rolloutId)).items;
    expect(stored.map((s) => s.name)).toEqual(["agentlightning.annotation"]);
    expect(stored[0]!.sequence_id).toBe(1);
    expect(t.unacknowledgedCount).toBe(0);
  });

  it("keeps the order of spans retried after an outage before spans recorded later", async () => {
    store = new InMemoryLightningStore();
    const f = faultyStore(store);
    const ids = await attemptOf(store);
    const tracer = new LightningTracer({ logger: silentLogger });
    const t = tracer.traceAttempt({ ...ids, store: f.store, retryDelaysMs: [0] });
    f.failNext.seq = 1;
    t.run(() => emitMessage("first"));
    while (f.failNext.seq > 0) await tick();
    await tick();
    t.run(() => emitMessage("second"));
    await t.flush();
    const stored = (await store.querySpans(ids.rolloutId)).items;
    expect(stored).toHaveLength(2);
    const bySeq = [...stored].sort((a, b) => a.sequence_id - b.sequence_id);
    expect(JSON.stringify(bySeq[0]!.attributes)).toContain("first");
    expect(JSON.stringify(bySeq[1]!.attributes)).toContain("second");
  });

  it("counts what is still unacknowledged once its retries run out", async () => {
    store = new InMemoryLightningStore();
    const f = faultyStore(store);
    const ids = await attemptOf(store);
    const tracer = new LightningTracer({ logger: silentLogger });
    const t = tracer.traceAttempt({ ...ids, store: f.store, retryDelaysMs: [0, 0] });
    f.failNext.write = 100;
    f.failNext.seq = 0;
    t.run(() => {
      emitMessage("a");
      emitReward(1);
    });
    await t.flush();
    expect(t.unacknowledgedCount).toBe(2);
    expect(t.unsentSpans()).toHaveLength(2);
    expect((await store.querySpans(ids.rolloutId)).items).toHaveLength(0);
    // The store comes back: a later flush stores them, each once.
    f.failNext.write = 0;
    await t.flush();
    expect(t.unacknowledgedCount).toBe(0);
    expect((await store.querySpans(ids.rolloutId)).items).toHaveLength(2);
  });

  it("resending a write the store did apply stores no duplicate", async () => {
    store = new InMemoryLightningStore();
    const ids = await attemptOf(store);
    let lostAnswers = 1;
    const lossy = wrapWrites(store, async (spans, write) => {
      const out = await write(spans);
      if (lostAnswers-- > 0) throw new Error("connection reset after the write");
      return out;
    });
    const tracer = new LightningTracer({ logger: silentLogger });
    const t = tracer.traceAttempt({ ...ids, store: lossy, retryDelaysMs: [0] });
    t.run(() => emitReward(1));
    await t.flush();
    expect(t.unacknowledgedCount).toBe(0);
    expect((await store.querySpans(ids.rolloutId)).items).toHaveLength(1);
  });
});

describe("RolloutTrace: what an agent records never fails its attempt for its content", () => {
  it("sanitises text no store can hold before sending it: no refusal, no retry", async () => {
    store = new InMemoryLightningStore();
    const ids = await attemptOf(store);
    let writes = 0;
    const counting = wrapWrites(store, (spans, write) => {
      writes++;
      return write(spans);
    });
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
    const tracer = new LightningTracer({ logger });
    const t = tracer.traceAttempt({ ...ids, store: counting, retryDelaysMs: [0, 0] });
    t.run(() => {
      emitMessage("tool said a\u0000b and \ud800");
      emitReward(1);
    });
    await t.flush();
    expect([t.unacknowledgedCount, t.refusedCount, writes, warnings]).toEqual([0, 0, 1, []]);
    const stored = (await store.querySpans(ids.rolloutId)).items;
    expect(stored[0]!.attributes).toMatchObject({
      "agentlightning.message.body": "tool said a\uFFFDb and \uFFFD",
      "agl.sanitized": true,
    });
    expect(stored[1]!.attributes["agl.sanitized"]).toBeUndefined();
    // What the trace keeps locally is what the store holds.
    expect(t.spans()).toEqual(stored);
  });

  it("a span the store refuses as invalid is dropped alone and logged; the rest of its batch is stored", async () => {
    store = new InMemoryLightningStore();
    const ids = await attemptOf(store);
    // A store with a rule of its own: it refuses spans named "refused" (as a 4xx would).
    const picky = wrapWrites(store, async (spans, write) => {
      if (spans.some((s) => s.name === "refused")) throw new InvalidArgumentError("span.name", "not here");
      return write(spans);
    });
    const warnings: string[] = [];
    const logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
    const tracer = new LightningTracer({ logger });
    const t = tracer.traceAttempt({ ...ids, store: picky, retryDelaysMs: [0, 0] });
    t.run(() => {
      emitMessage("first");
      t.addSpan({ name: "refused", attributes: {} } as never);
      emitReward(1);
    });
    await t.flush();
    expect([t.unacknowledgedCount, t.refusedCount]).toEqual([0, 1]);
    expect((await store.querySpans(ids.rolloutId)).items.map((s) => s.name)).toEqual([
      "agentlightning.message",
      "agentlightning.annotation",
    ]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/refused span 2 \(refused\) of .*dropped: .*not here/);
  });
});
