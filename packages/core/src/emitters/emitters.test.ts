import { afterEach, describe, expect, it } from "vitest";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LightningTracer } from "../tracing/tracer.js";
import { emitAnnotation, emitException, emitMessage, emitObject } from "./emit.js";
import { operation, parameterNames } from "./operation.js";
import { emitReward, rewardAttributes } from "./reward.js";
import { findFinalReward, getRewardDimensions, getRewardValue } from "./reward-reader.js";

const tracer = new LightningTracer({ logger: silentLogger });
let store: InMemoryLightningStore;

async function inRollout<T>(fn: () => T | Promise<T>) {
  store = new InMemoryLightningStore();
  const r = await store.startRollout({ input: "t" });
  const trace = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
  const value = await trace.run(async () => fn());
  await trace.flush();
  const spans = (await store.querySpans(r.rollout_id)).items;
  return { value, spans, rollout: r };
}

afterEach(async () => {
  await store?.close();
});

describe("emitReward", () => {
  it("encodes a scalar as agentlightning.annotation with reward.0.name=primary", async () => {
    const { value, spans } = await inRollout(() => emitReward(0.75));
    expect(value.name).toBe("agentlightning.annotation");
    expect(value.attributes).toEqual({
      "agentlightning.reward.0.name": "primary",
      "agentlightning.reward.0.value": 0.75,
    });
    expect(spans).toHaveLength(1);
    expect(spans[0]!.name).toBe("agentlightning.annotation");
    expect(spans[0]!.attributes["agentlightning.reward.0.value"]).toBe(0.75);
    expect(getRewardValue(spans[0]!)).toBe(0.75);
  });

  it("puts the primary key first for multi-dimensional rewards", () => {
    const attrs = rewardAttributes({ speed: 0.2, accuracy: 0.9, cost: -1 }, "accuracy");
    expect(attrs).toEqual({
      "agentlightning.reward.0.name": "accuracy",
      "agentlightning.reward.0.value": 0.9,
      "agentlightning.reward.1.name": "speed",
      "agentlightning.reward.1.value": 0.2,
      "agentlightning.reward.2.name": "cost",
      "agentlightning.reward.2.value": -1,
    });
    const span = { name: "agentlightning.annotation", attributes: attrs };
    expect(getRewardValue(span)).toBe(0.9);
    expect(getRewardDimensions(span).map((d) => d.name)).toEqual(["accuracy", "speed", "cost"]);
  });

  it("rejects bad rewards naming the field", () => {
    expect(() => emitReward({ a: 1 }, { propagate: false })).toThrow(/primaryKey/);
    expect(() => emitReward({ a: 1 }, { primaryKey: "b", propagate: false })).toThrow(/primaryKey/);
    const err = (() => {
      try {
        emitReward({ a: 1, b: "x" as any }, { primaryKey: "a", propagate: false });
      } catch (e) {
        return e;
      }
    })();
    expect(InvalidArgumentError.isInstance(err)).toBe(true);
    expect((err as InvalidArgumentError).field).toBe("reward.b");
    expect(() => emitReward(Number.NaN, { propagate: false })).toThrow(/reward/);
    expect(() => emitReward(1, { propagate: false, attributes: { nested: { d: new Date() } } })).toThrow(
      /nested\.d/,
    );
  });

  it("with propagate: false returns core fields and stores nothing", async () => {
    const { value, spans } = await inRollout(() => emitReward(1, { propagate: false }));
    expect(value.attributes["agentlightning.reward.0.value"]).toBe(1);
    expect(spans).toHaveLength(0);
  });

  it("outside a rollout returns the core fields without throwing", () => {
    const core = emitReward(2);
    expect(core.status.status_code).toBe("OK");
    expect(core.start_time).toBeTypeOf("number");
  });
});

describe("other emitters", () => {
  it("emitAnnotation flattens nested values and rejects non-primitive leaves", async () => {
    const { spans } = await inRollout(() => emitAnnotation({ a: { b: 1, c: [true, "x"] }, d: "e" }));
    expect(spans[0]!.attributes).toEqual({ "a.b": 1, "a.c.0": true, "a.c.1": "x", d: "e" });
    expect(() => emitAnnotation({ a: { f: () => 1 } }, { propagate: false })).toThrow(/a\.f/);
    expect(() => emitAnnotation({ a: null }, { propagate: false })).toThrow(/a/);
  });

  it("emitMessage stores agentlightning.message.body", async () => {
    const { spans } = await inRollout(() => emitMessage("hello"));
    expect(spans[0]!.name).toBe("agentlightning.message");
    expect(spans[0]!.attributes["agentlightning.message.body"]).toBe("hello");
    expect(() => emitMessage(42 as any)).toThrow(/message/);
  });

  it("emitObject uses literal for primitives, base64 for bytes, json otherwise", () => {
    expect(emitObject("s", { propagate: false }).attributes).toEqual({
      "agentlightning.object.type": "string",
      "agentlightning.object.literal": "s",
    });
    expect(emitObject(3, { propagate: false }).attributes["agentlightning.object.literal"]).toBe(3);
    expect(emitObject(new Uint8Array([1, 2, 3]), { propagate: false }).attributes).toEqual({
      "agentlightning.object.type": "bytes",
      "agentlightning.object.literal": "AQID",
    });
    expect(emitObject({ a: [1, { b: 2 }] }, { propagate: false }).attributes).toEqual({
      "agentlightning.object.type": "object",
      "agentlightning.object.json": '{"a":[1,{"b":2}]}',
    });
  });

  it("emitException records exception.* attributes, an event and status ERROR", async () => {
    class BoomError extends Error {
      override name = "BoomError";
    }
    const { value, spans } = await inRollout(() => emitException(new BoomError("boom")));
    expect(value.status).toEqual({ status_code: "ERROR", description: "boom" });
    const span = spans[0]!;
    expect(span.name).toBe("agentlightning.exception");
    expect(span.attributes["exception.type"]).toBe("BoomError");
    expect(span.attributes["exception.message"]).toBe("boom");
    expect(span.attributes["exception.escaped"]).toBe(true);
    expect(String(span.attributes["exception.stacktrace"])).toContain("BoomError");
    expect(span.events.map((e) => e.name)).toContain("exception");
    expect(span.status.status_code).toBe("ERROR");
  });
});

describe("operation", () => {
  it("wrapper form records name, inputs by parameter name and output", async () => {
    const add = operation(async function add(a: number, b: number) {
      return { sum: a + b };
    });
    const { value, spans } = await inRollout(() => add(2, 3));
    expect(value).toEqual({ sum: 5 });
    const span = spans.find((s) => s.name === "agentlightning.operation")!;
    expect(span.attributes).toMatchObject({
      "agentlightning.operation.name": "add",
      "agentlightning.operation.input.a": 2,
      "agentlightning.operation.input.b": 3,
      "agentlightning.operation.output.sum": 5,
    });
  });

  it("falls back to args.<i> for parameters it cannot name, and nests child spans", async () => {
    const f = operation(({ x }: { x: number }) => {
      emitMessage("inside");
      return x * 2;
    });
    const { spans } = await inRollout(() => f({ x: 4 }));
    const op = spans.find((s) => s.name === "agentlightning.operation")!;
    const msg = spans.find((s) => s.name === "agentlightning.message")!;
    expect(op.attributes["agentlightning.operation.input.args.0.x"]).toBe(4);
    expect(op.attributes["agentlightning.operation.output"]).toBe(8);
    expect(msg.parent_id).toBe(op.span_id);
    expect(msg.trace_id).toBe(op.trace_id);
  });

  it("block form returns the body's result; an error sets status ERROR and is rethrown", async () => {
    const { spans } = await inRollout(async () => {
      const v = await operation("lookup", async (op) => {
        op.setInput({ q: "k" });
        op.setOutput("v");
        return "v";
      });
      expect(v).toBe("v");
      expect(() =>
        operation("broken", () => {
          throw new Error("nope");
        }),
      ).toThrow("nope");
      await expect(operation("broken-async", async () => Promise.reject(new Error("later")))).rejects.toThrow(
        "later",
      );
    });
    const ok = spans.find((s) => s.attributes["agentlightning.operation.name"] === "lookup")!;
    expect(ok.attributes["agentlightning.operation.input.q"]).toBe("k");
    expect(ok.attributes["agentlightning.operation.output"]).toBe("v");
    const bad = spans.find((s) => s.attributes["agentlightning.operation.name"] === "broken")!;
    expect(bad.status).toMatchObject({ status_code: "ERROR", description: "nope" });
    const badAsync = spans.find((s) => s.attributes["agentlightning.operation.name"] === "broken-async")!;
    expect(badAsync.status).toMatchObject({ status_code: "ERROR", description: "later" });
    expect(badAsync.events.map((e) => e.name)).toContain("exception");
  });

  it("reads simple parameter names and gives up on complex ones", () => {
    expect(parameterNames((a: number, b: number) => a + b)).toEqual(["a", "b"]);
    expect(
      parameterNames(function f(x: number) {
        return x;
      }),
    ).toEqual(["x"]);
    expect(parameterNames((...rest: number[]) => rest)).toBeNull();
  });
});

describe("reward readers", () => {
  it("accept the AgentOps, annotation and v0.2 forms, first match wins", () => {
    expect(
      getRewardValue({ name: "x", attributes: { "agentops.task.output": '{"type":"reward","value":0.5}' } }),
    ).toBe(0.5);
    expect(
      getRewardValue({ name: "x", attributes: { "agentops.entity.output": { type: "reward", value: 2 } } }),
    ).toBe(2);
    expect(getRewardValue({ name: "agentlightning.annotation", attributes: { reward: 3 } })).toBe(3);
    expect(getRewardValue({ name: "agentlightning.reward", attributes: { reward: 4 } })).toBe(4);
    expect(getRewardValue({ name: "other", attributes: { reward: 4 } })).toBeNull();
    expect(
      getRewardValue({
        name: "agentlightning.annotation",
        attributes: { "agentlightning.reward": [{ name: "primary", value: 7 }], reward: 1 },
      }),
    ).toBe(7);
  });

  it("findFinalReward returns the last reward in list order", () => {
    const spans = [
      { name: "agentlightning.annotation", attributes: rewardAttributes(1) },
      { name: "openai.chat.completion", attributes: {} },
      { name: "agentlightning.annotation", attributes: rewardAttributes(5) },
      { name: "agentlightning.message", attributes: {} },
    ];
    expect(findFinalReward(spans)).toBe(5);
    expect(findFinalReward([])).toBeNull();
  });
});
