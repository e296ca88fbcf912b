import { describe, expect, it } from "vitest";
import type { RolloutContext } from "../agent/types.js";
import { silentLogger } from "../logger.js";
import { Runner } from "../runner/runner.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LightningTracer } from "../tracing/tracer.js";
import type { AlgorithmContext } from "./algorithm.js";
import { Baseline } from "./baseline.js";
import { Trainer } from "./trainer.js";

describe("Baseline summary", () => {
  it("counts cancelled rollouts next to succeeded and failed ones", async () => {
    const trainer = new Trainer({ logger: silentLogger, runnerConcurrency: 3 });
    const agent = async (task: string, { rollout }: RolloutContext) => {
      if (task === "cancel") await trainer.store.updateRollout(rollout.rollout_id, { status: "cancelled" });
      if (task === "fail") throw new Error("boom");
      return 1;
    };
    const { result } = await trainer.dev(agent, ["ok", "cancel", "fail", "cancel"]);
    const summary = result as Awaited<ReturnType<Baseline["run"]>>;
    expect(summary.succeeded).toBe(1);
    expect(summary.failed).toBe(1);
    expect(summary.cancelled).toBe(2);
    expect(summary.unfinished).toBe(0);
    expect(summary.byStatus).toEqual({ succeeded: 1, failed: 1, cancelled: 2 });
    expect(summary.rollouts.map((r) => r.status)).toEqual(["succeeded", "cancelled", "failed", "cancelled"]);
  });

  it("reports rollouts still queued when stopped as unfinished, by status", async () => {
    const store = new InMemoryLightningStore({ watchdog: false });
    const controller = new AbortController();
    const baseline = new Baseline({ maxQueueLength: 10, pollIntervalMs: 5 });
    const context: AlgorithmContext = {
      store,
      adapter: undefined,
      trainDataset: [1, 2],
      valDataset: undefined,
      initialResources: {},
      signal: controller.signal,
      logger: silentLogger,
    };
    // No runner: nothing ever leaves the queue, so the run only ends when it is stopped.
    const running = baseline.run(context);
    setTimeout(() => controller.abort(), 50);
    const summary = await running;
    expect(summary.rollouts).toHaveLength(2);
    expect(summary.unfinished).toBe(2);
    expect(summary.byStatus).toEqual({ queuing: 2 });
    expect(summary.succeeded + summary.failed + summary.cancelled).toBe(0);
    await store.close();
  });
});

describe("tracer option", () => {
  it("accepts a LightningTracer from another copy of @agl/core (marker symbol, not instanceof)", () => {
    class ForeignTracer {}
    Object.defineProperty(ForeignTracer.prototype, Symbol.for("agl.LightningTracer"), { value: true });
    const foreign = new ForeignTracer() as unknown as LightningTracer;
    expect(foreign instanceof LightningTracer).toBe(false);
    expect(LightningTracer.isInstance(foreign)).toBe(true);
    expect(LightningTracer.isInstance(new LightningTracer({ logger: silentLogger }))).toBe(true);
    expect(LightningTracer.isInstance({})).toBe(false);
    const store = new InMemoryLightningStore({ watchdog: false });
    expect(new Runner({ store, agent: async () => 1, tracer: foreign }).tracer).toBe(foreign);
    expect(() => new Trainer({ tracer: foreign })).not.toThrow();
    expect(() => new Runner({ store, agent: async () => 1, tracer: {} as any })).toThrow(/runner\.tracer/);
    expect(() => new Trainer({ tracer: {} as any })).toThrow(/trainer\.tracer/);
  });
});
