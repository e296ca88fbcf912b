import { describe, expect, it } from "vitest";
import { rollout } from "../agent/rollout.js";
import type { RolloutContext } from "../agent/types.js";
import { emitReward } from "../emitters/reward.js";
import { InvalidArgumentError } from "../errors.js";
import { silentLogger } from "../logger.js";
import { Runner } from "../runner/runner.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { llm } from "../types/resources.js";
import type { AttemptedRollout } from "../types/rollout.js";
import type { Span } from "../types/span.js";
import type { Algorithm, AlgorithmContext } from "./algorithm.js";
import { Baseline, type BaselineSummary } from "./baseline.js";
import { Trainer } from "./trainer.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("Trainer", () => {
  it("dev() runs a Baseline over the dataset with no configuration and reports per-rollout rewards", async () => {
    const trainer = new Trainer({ logger: silentLogger });
    const agent = rollout(async (task: { a: number; b: number }) => {
      emitReward({ correct: task.a + task.b === 3 ? 1 : 0, length: 2 }, { primaryKey: "correct" });
    });
    const { result, runners } = await trainer.dev<{ a: number; b: number }, BaselineSummary>(agent, [
      { a: 1, b: 2 },
      { a: 2, b: 2 },
      { a: 0, b: 3 },
    ]);
    expect(result.rollouts.map((r) => [r.input, r.status, r.reward, r.mode])).toEqual([
      [{ a: 1, b: 2 }, "succeeded", 1, "train"],
      [{ a: 2, b: 2 }, "succeeded", 0, "train"],
      [{ a: 0, b: 3 }, "succeeded", 1, "train"],
    ]);
    expect(result.meanReward).toBeCloseTo(2 / 3);
    expect(result.succeeded).toBe(3);
    expect(runners).toHaveLength(1);
    expect(runners[0]!.succeeded).toBe(3);
    expect(trainer.store).toBeInstanceOf(InMemoryLightningStore);
  });

  it("fit() runs train then val items across several runners, publishing initial resources, with an adapter", async () => {
    const adapted: Span[][] = [];
    const trainer = new Trainer({
      nRunners: 3,
      algorithm: new Baseline({ maxQueueLength: 2, pollIntervalMs: 20 }),
      initialResources: { main: llm({ endpoint: "http://m/v1", model: "m1" }) },
      adapter: {
        adapt: (spans: Span[]) => {
          adapted.push(spans);
          return spans.filter((s) => s.name !== "agent.rollout").length;
        },
      },
      logger: silentLogger,
    });
    const models: string[] = [];
    const agent = async (task: number, { llm, rollout }: RolloutContext) => {
      models.push(llm!.model);
      await sleep(5);
      return rollout.mode === "train" ? task : -task;
    };
    const { result, runners } = await trainer.fit<number, BaselineSummary>(agent, [1, 2, 3, 4], {
      valDataset: [5, 6],
    });
    expect(result.rollouts.map((r) => [r.mode, r.reward])).toEqual([
      ["train", 1],
      ["train", 2],
      ["train", 3],
      ["train", 4],
      ["val", -5],
      ["val", -6],
    ]);
    expect(result.rollouts.every((r) => r.adapted === 1)).toBe(true);
    expect(adapted).toHaveLength(6);
    expect(new Set(models)).toEqual(new Set(["m1"]));
    expect(runners.map((r) => r.workerId)).toEqual(["Worker-0", "Worker-1", "Worker-2"]);
    expect(runners.reduce((n, r) => n + r.succeeded, 0)).toBe(6);
    expect((await trainer.store.getResourcesById("default"))?.resources.main).toMatchObject({ model: "m1" });
  });

  it("reports failed rollouts with their error", async () => {
    const trainer = new Trainer({ logger: silentLogger });
    const { result } = await trainer.dev<number, BaselineSummary>(
      async (t: number) => {
        if (t === 2) throw new Error("bad task");
        return 1;
      },
      [1, 2],
    );
    expect(result.rollouts[1]).toMatchObject({ status: "failed", error: "bad task", reward: null });
    expect(result.failed).toBe(1);
  });

  it("passes the store, datasets and signal to a custom algorithm and stops runners after it", async () => {
    let seen: AlgorithmContext<number> | undefined;
    const algorithm: Algorithm<number, number> = {
      name: "custom",
      async run(ctx) {
        seen = ctx;
        await ctx.store.addResources({});
        const rollouts = await ctx.store.enqueueManyRollouts(ctx.trainDataset.map((input) => ({ input })));
        const done = await ctx.store.waitForRollouts(
          rollouts.map((r) => r.rollout_id),
          { timeoutSeconds: 5 },
        );
        return done.length;
      },
    };
    const store = new InMemoryLightningStore();
    const trainer = new Trainer({ algorithm, store, logger: silentLogger });
    const { result } = await trainer.fit(async () => 1, [1, 2, 3]);
    expect(result).toBe(3);
    expect(seen!.store).toBe(store);
    expect(seen!.valDataset).toBeUndefined();
    expect(seen!.signal.aborted).toBe(false);
    // dev() does not run a non-fast algorithm: it runs a Baseline.
    const dev = await trainer.dev<number, BaselineSummary>(async () => 1, [9]);
    expect(dev.result.rollouts).toHaveLength(1);
    await store.close();
  });

  it("an algorithm error is rethrown after the runners stop", async () => {
    const trainer = new Trainer({
      logger: silentLogger,
      algorithm: {
        async run() {
          throw new Error("algorithm exploded");
        },
      },
    });
    await expect(trainer.fit(async () => 1, [1])).rejects.toThrow("algorithm exploded");
  });

  it("stops when the caller's signal aborts", async () => {
    const controller = new AbortController();
    const trainer = new Trainer({ logger: silentLogger, gracePeriodMs: 10 });
    // The agent never returns by itself: only the abort ends it (the default grace would be 5 s).
    const agent = async (_: number, { signal }: RolloutContext) => {
      controller.abort();
      await new Promise((res) => signal.addEventListener("abort", res));
    };
    const started = Date.now();
    const { result, runners } = await trainer.dev<number, BaselineSummary>(agent, [1, 2, 3], {
      signal: controller.signal,
    });
    expect(Date.now() - started).toBeLessThan(4_000);
    expect(result.succeeded).toBe(0);
    expect(runners[0]!.abandoned).toBe(1);
    const first = result.rollouts[0]!.rolloutId;
    expect((await trainer.store.getLatestAttempt(first))!.status).toBe("failed");
  });

  it("nRunners 0: the algorithm runs alone and its rollouts are done by a runner outside the trainer", async () => {
    const store = new InMemoryLightningStore();
    const trainer = new Trainer({
      store,
      nRunners: 0,
      algorithm: new Baseline({ maxQueueLength: 2, pollIntervalMs: 10 }),
      initialResources: { main: llm({ endpoint: "http://m/v1", model: "m1" }) },
      logger: silentLogger,
    });
    const agent = async (task: number) => task * 2;
    // Stands for an agl-worker on another machine: same store, its own runner, not the trainer's.
    const remote = new Runner({
      store,
      agent,
      workerId: "remote-1",
      pollIntervalMs: 5,
      logger: silentLogger,
    });
    const stopRemote = new AbortController();
    const remoteRun = remote.run({ signal: stopRemote.signal });
    // The trainer never runs the agent, so it need not load it.
    const { result, runners } = await trainer.fit<number, BaselineSummary>(null, [1, 2, 3]);
    stopRemote.abort();
    expect(runners).toEqual([]);
    expect(result.rollouts.map((r) => [r.status, r.reward])).toEqual([
      ["succeeded", 2],
      ["succeeded", 4],
      ["succeeded", 6],
    ]);
    expect((await remoteRun).succeeded).toBe(3);
    const claimedBy = await store.queryRollouts();
    for (const r of claimedBy.items) expect((r as AttemptedRollout).attempt.worker_id).toBe("remote-1");
  });

  it("bad options fail naming the field", () => {
    const field = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(InvalidArgumentError.isInstance(e)).toBe(true);
        return (e as InvalidArgumentError).field;
      }
      return "no error";
    };
    expect(field(() => new Trainer({ nRunners: -1 }))).toBe("trainer.nRunners");
    expect(field(() => new Trainer({ nRunner: 2 } as any))).toBe("trainer.nRunner");
    expect(field(() => new Trainer({ algorithm: {} as any }))).toBe("trainer.algorithm");
    expect(field(() => new Trainer({ adapter: { adapt: 1 } as any }))).toBe("trainer.adapter");
    expect(field(() => new Trainer({ store: 1 as any }))).toBe("trainer.store");
    expect(
      field(
        () => new Trainer({ initialResources: { main: { resource_type: "llm", endpoint: "x" } as any } }),
      ),
    ).toBe("trainer.initialResources.main.model");
    expect(field(() => new Baseline({ nEpochs: 0 }))).toBe("baseline.nEpochs");
    expect(field(() => new Baseline({ maxQueue: 1 } as any))).toBe("baseline.maxQueue");
  });

  it("dataset arguments are validated", async () => {
    const trainer = new Trainer({ logger: silentLogger });
    await expect(trainer.dev(async () => 1, "nope" as any)).rejects.toThrow(/trainDataset/);
    await expect(trainer.fit(async () => 1, [1], { valDataset: 3 as any })).rejects.toThrow(/valDataset/);
    await expect(trainer.fit(42 as any, [1])).rejects.toThrow(/agent/);
    await expect(trainer.fit(null, [1])).rejects.toThrow(/agent/);
  });
});
