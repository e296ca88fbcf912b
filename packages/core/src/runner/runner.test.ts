import { afterEach, describe, expect, it } from "vitest";
import { LitAgent } from "../agent/lit-agent.js";
import { rollout } from "../agent/rollout.js";
import type { RolloutContext } from "../agent/types.js";
import { emitMessage } from "../emitters/emit.js";
import { emitReward } from "../emitters/reward.js";
import { findFinalReward } from "../emitters/reward-reader.js";
import { InvalidArgumentError } from "../errors.js";
import { type Logger, silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LightningTracer } from "../tracing/tracer.js";
import { llm, promptTemplate, proxyLLM } from "../types/resources.js";
import { ROLLOUT_SPAN_NAME } from "./rollout-span.js";
import { Runner, type RunnerOptions } from "./runner.js";

let store: InMemoryLightningStore;
afterEach(async () => store?.close());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function setup(resources: Record<string, any> | null = {}) {
  store = new InMemoryLightningStore();
  if (resources) await store.addResources(resources);
  return store;
}

function runner(options: Omit<RunnerOptions, "store"> & { store?: RunnerOptions["store"] }) {
  return new Runner({ store, pollIntervalMs: 5, logger: silentLogger, ...options });
}

async function runOne(
  agent: RunnerOptions["agent"],
  input: unknown = "task",
  extra: Partial<RunnerOptions> = {},
) {
  const r = await store.enqueueRollout({ input });
  const summary = await runner({ agent, maxRollouts: 1, ...extra }).run();
  const rollout = (await store.getRolloutById(r.rollout_id))!;
  const attempt = (await store.getLatestAttempt(r.rollout_id))!;
  // The enclosing agent.rollout span is checked in rollout-span.test.ts; these tests look at the rest.
  const spans = (await store.querySpans(r.rollout_id)).items.filter((s) => s.name !== ROLLOUT_SPAN_NAME);
  return { summary, rollout, attempt, spans };
}

describe("Runner results", () => {
  it("a number becomes a reward span and the attempt succeeds", async () => {
    await setup();
    const { summary, rollout, attempt, spans } = await runOne(async () => 0.5);
    expect(summary).toMatchObject({ claimed: 1, succeeded: 1, failed: 0 });
    expect(rollout.status).toBe("succeeded");
    expect(attempt.status).toBe("succeeded");
    expect(attempt.worker_id).toBe(summary.workerId);
    expect(spans).toHaveLength(1);
    expect(spans[0]!.name).toBe("agentlightning.annotation");
    expect(findFinalReward(spans)).toBe(0.5);
  });

  it("a boolean counts as a reward of 1 or 0", async () => {
    await setup();
    const { spans } = await runOne(() => true);
    expect(findFinalReward(spans)).toBe(1);
  });

  it("nothing returned keeps the traced spans", async () => {
    await setup();
    const { spans, rollout } = await runOne(async (task: string) => {
      emitMessage(`working on ${task}`);
      emitReward(0.25);
    });
    expect(rollout.status).toBe("succeeded");
    expect(spans.map((s) => s.name)).toEqual(["agentlightning.message", "agentlightning.annotation"]);
    expect(findFinalReward(spans)).toBe(0.25);
  });

  it("a span list is stored for this attempt (core fields, span shapes, OTel spans)", async () => {
    await setup();
    const tracer = new LightningTracer({ logger: silentLogger });
    const { spans, attempt } = await runOne(async () => {
      const otel = tracer.otelTracer.startSpan("custom.otel");
      otel.end();
      return [
        emitReward(0.9, { propagate: false }),
        {
          rollout_id: "elsewhere",
          attempt_id: "x",
          sequence_id: 0,
          trace_id: "a".repeat(32),
          span_id: "b".repeat(16),
          name: "shaped",
        },
        otel as any,
      ];
    });
    expect(spans.map((s) => s.name).sort()).toEqual(["agentlightning.annotation", "custom.otel", "shaped"]);
    for (const s of spans) expect(s.attempt_id).toBe(attempt.attempt_id);
    expect(findFinalReward(spans)).toBe(0.9);
  });

  it("an empty list is accepted with a warning", async () => {
    await setup();
    const warnings: string[] = [];
    const logger: Logger = { ...silentLogger, warn: (m: string) => warnings.push(m) };
    const { rollout } = await runOne(async () => [], "t", { logger });
    expect(rollout.status).toBe("succeeded");
    expect(warnings.some((w) => w.includes("empty span list"))).toBe(true);
  });

  it("an unsupported return value fails the attempt naming the problem", async () => {
    await setup();
    const { rollout, attempt, summary } = await runOne(async () => "great" as any);
    expect(summary.failed).toBe(1);
    expect(rollout.status).toBe("failed");
    expect(attempt.metadata?.error).toMatchObject({ type: "InvalidArgumentError", field: "result" });
  });

  it("an exception fails the attempt, recorded as an exception span and in metadata", async () => {
    await setup();
    const { rollout, attempt, spans, summary } = await runOne(async () => {
      emitMessage("before");
      throw new TypeError("agent broke");
    });
    expect(summary).toMatchObject({ failed: 1, succeeded: 0 });
    expect(rollout.status).toBe("failed");
    expect(attempt.status).toBe("failed");
    expect(attempt.metadata?.error).toMatchObject({ type: "TypeError", message: "agent broke" });
    const exc = spans.find((s) => s.name === "agentlightning.exception")!;
    expect(exc.attributes["exception.message"]).toBe("agent broke");
    expect(spans.some((s) => s.name === "agentlightning.message")).toBe(true);
  });

  it("no resources in the store fails the attempt with a clear error", async () => {
    await setup(null);
    let called = false;
    const { attempt } = await runOne(async () => {
      called = true;
    });
    expect(called).toBe(false);
    expect(attempt.status).toBe("failed");
    expect(String((attempt.metadata?.error as any)?.message)).toMatch(/No resources in the store/);
  });

  it("a rollout's own resources version is used, and a missing version fails", async () => {
    await setup({ main: llm({ endpoint: "http://latest/v1", model: "latest" }) });
    const pinned = await store.addResources({ main: llm({ endpoint: "http://pinned/v1", model: "pinned" }) });
    await store.addResources({ main: llm({ endpoint: "http://newest/v1", model: "newest" }) });
    const seen: string[] = [];
    const agent = async (_t: unknown, { llm }: RolloutContext) => {
      seen.push(llm!.model);
    };
    await store.enqueueRollout({ input: 1, resources_id: pinned.resources_id });
    await store.enqueueRollout({ input: 2 });
    const missing = await store.enqueueRollout({ input: 3, resources_id: "rs-missing" });
    await runner({ agent, maxRollouts: 3 }).run();
    expect(seen).toEqual(["pinned", "newest"]);
    const attempt = (await store.getLatestAttempt(missing.rollout_id))!;
    expect(attempt.status).toBe("failed");
    expect(String((attempt.metadata?.error as any)?.message)).toContain("rs-missing");
  });

  it("resolves a ProxyLLM to the attempt's URL and injects the first LLM and prompt template", async () => {
    await setup({
      tmpl: promptTemplate("Solve {x}"),
      proxy: proxyLLM({ endpoint: "http://proxy:8000/v1", model: "policy" }),
      other: llm({ endpoint: "http://other/v1", model: "other" }),
      tmpl2: promptTemplate("second"),
    });
    let ctx: RolloutContext | undefined;
    const { attempt, rollout } = await runOne(async (_t: unknown, c: RolloutContext) => {
      ctx = c;
    });
    expect(ctx!.llm).toMatchObject({
      resource_type: "llm",
      model: "policy",
      endpoint: `http://proxy:8000/rollout/${rollout.rollout_id}/attempt/${attempt.attempt_id}/v1`,
    });
    expect(ctx!.promptTemplate?.template).toBe("Solve {x}");
    expect(ctx!.resources.proxy!.resource_type).toBe("llm");
    expect(ctx!.rollout.attempt.attempt_id).toBe(attempt.attempt_id);
  });
});

describe("Runner lifecycle", () => {
  it("runs rollouts concurrently up to `concurrency` and stops after maxRollouts", async () => {
    await setup();
    await store.enqueueManyRollouts(Array.from({ length: 9 }, (_, i) => ({ input: i })));
    let active = 0;
    let peak = 0;
    const summary = await runner({
      concurrency: 3,
      maxRollouts: 7,
      agent: async () => {
        active++;
        peak = Math.max(peak, active);
        await sleep(15);
        active--;
        return 1;
      },
    }).run();
    expect(summary).toMatchObject({ claimed: 7, succeeded: 7 });
    expect(peak).toBe(3);
    expect((await store.queryRollouts({ statusIn: ["queuing"] })).total).toBe(2);
  });

  it("uses trainingRollout for mode train and validationRollout otherwise", async () => {
    await setup();
    class Agent extends LitAgent<string> {
      calls: string[] = [];
      override trainingRollout(task: string) {
        this.calls.push(`train:${task}`);
        return 1;
      }
      override validationRollout(task: string) {
        this.calls.push(`val:${task}`);
        return 0;
      }
    }
    const agent = new Agent();
    await store.enqueueRollout({ input: "a", mode: "train" });
    await store.enqueueRollout({ input: "b", mode: "val" });
    await store.enqueueRollout({ input: "c" });
    await runner({ agent, maxRollouts: 3 }).run();
    expect(agent.calls).toEqual(["train:a", "val:b", "val:c"]);
  });

  it("sends attempt and worker heartbeats while the agent works", async () => {
    await setup();
    const r = await store.enqueueRollout({ input: 1 });
    const beats: Array<number | null> = [];
    const run = runner({
      workerId: "Worker-hb",
      heartbeatIntervalSeconds: 0.02,
      maxRollouts: 1,
      agent: async () => {
        for (let i = 0; i < 4; i++) {
          await sleep(30);
          beats.push((await store.getLatestAttempt(r.rollout_id))!.last_heartbeat_time);
        }
      },
    }).run();
    await run;
    const distinct = new Set(beats);
    expect(distinct.size).toBeGreaterThan(1);
    const worker = (await store.getWorkerById("Worker-hb"))!;
    expect(worker.last_heartbeat_time).not.toBeNull();
    expect(worker.heartbeat_stats).toMatchObject({ pid: process.pid });
  });

  it("attempt heartbeats keep a long, span-less rollout from being marked unresponsive", async () => {
    await setup();
    const r = await store.enqueueRollout({ input: 1, config: { unresponsive_seconds: 0.1 } });
    const during = async (heartbeatIntervalSeconds: number) => {
      const statuses: string[] = [];
      await runner({
        heartbeatIntervalSeconds,
        maxRollouts: 1,
        agent: async () => {
          for (let i = 0; i < 5; i++) {
            await sleep(70);
            statuses.push((await store.getLatestAttempt(r.rollout_id))!.status);
          }
          return 1;
        },
      }).run();
      return statuses;
    };
    expect(new Set(await during(0.03))).toEqual(new Set(["running"]));
    expect((await store.getLatestAttempt(r.rollout_id))!.status).toBe("succeeded");
    // Control: with heartbeats slower than unresponsive_seconds the same agent is seen as unresponsive.
    await store.enqueueRollout({ input: 2, config: { unresponsive_seconds: 0.1 } });
    const slow = await (async () => {
      const statuses: string[] = [];
      await runner({
        heartbeatIntervalSeconds: 10,
        maxRollouts: 1,
        agent: async (_t: unknown, { rollout }: RolloutContext) => {
          for (let i = 0; i < 5; i++) {
            await sleep(70);
            statuses.push((await store.getLatestAttempt(rollout.rollout_id))!.status);
          }
          return 1;
        },
      }).run();
      return statuses;
    })();
    expect(slow).toContain("unresponsive");
  });

  it("treats an attempt finished elsewhere (timed out) as stale without crashing", async () => {
    await setup();
    const r = await store.enqueueRollout({ input: 1, config: { timeout_seconds: 0.05 } });
    const summary = await runner({
      maxRollouts: 1,
      agent: async () => {
        await sleep(200);
        return 1;
      },
    }).run();
    expect(summary).toMatchObject({ claimed: 1, stale: 1, succeeded: 0 });
    expect((await store.getLatestAttempt(r.rollout_id))!.status).toBe("timeout");
  });

  it("on abort finishes in-flight rollouts within the grace period", async () => {
    await setup();
    await store.enqueueManyRollouts([{ input: 1 }, { input: 2 }]);
    const controller = new AbortController();
    const run = runner({
      concurrency: 2,
      gracePeriodMs: 1000,
      agent: async () => {
        controller.abort();
        await sleep(30);
        return 1;
      },
    }).run({ signal: controller.signal });
    const summary = await run;
    expect(summary).toMatchObject({ succeeded: 2, abandoned: 0 });
  });

  it("after the grace period aborts the agent's signal and marks the attempt failed", async () => {
    await setup();
    const r = await store.enqueueRollout({ input: 1 });
    const controller = new AbortController();
    let agentSignal: AbortSignal | undefined;
    let release!: () => void;
    const stuck = new Promise<void>((res) => (release = res));
    const summary = await runner({
      gracePeriodMs: 30,
      agent: async (_t: unknown, { signal }: RolloutContext) => {
        agentSignal = signal;
        controller.abort();
        await stuck;
        return 1;
      },
    }).run({ signal: controller.signal });
    expect(summary).toMatchObject({ claimed: 1, abandoned: 1, succeeded: 0 });
    expect(agentSignal?.aborted).toBe(true);
    const attempt = (await store.getLatestAttempt(r.rollout_id))!;
    expect(attempt.status).toBe("failed");
    expect(attempt.metadata?.error).toMatchObject({ type: "RunnerStopped" });
    release();
    await sleep(20);
    expect((await store.getLatestAttempt(r.rollout_id))!.status).toBe("failed");
  });

  it("an idle runner stops promptly on abort", async () => {
    await setup();
    const controller = new AbortController();
    const started = Date.now();
    const run = runner({ agent: async () => 1, pollIntervalMs: 60_000 }).run({ signal: controller.signal });
    await sleep(20);
    controller.abort();
    const summary = await run;
    expect(summary.claimed).toBe(0);
    // Not the 60 s poll interval.
    expect(Date.now() - started).toBeLessThan(30_000);
  });

  it("step() runs one rollout directly and rethrows agent errors", async () => {
    await setup(null);
    const r = runner({ agent: async (task: number) => task * 2 });
    const done = await r.step(21, {
      resources: { main: llm({ endpoint: "http://x/v1", model: "m" }) },
      mode: "val",
    });
    expect(done.status).toBe("succeeded");
    expect(done.mode).toBe("val");
    expect(findFinalReward((await store.querySpans(done.rollout_id)).items)).toBe(42);
    const failing = runner({
      agent: async () => {
        throw new Error("step failed");
      },
    });
    await expect(failing.step(1)).rejects.toThrow("step failed");
  });
});

describe("Runner options", () => {
  it("bad options fail naming the field", async () => {
    await setup();
    const field = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        expect(InvalidArgumentError.isInstance(e)).toBe(true);
        return (e as InvalidArgumentError).field;
      }
      return "no error";
    };
    const agent = rollout(async () => 1);
    expect(field(() => new Runner({ store, agent, concurrency: 0 }))).toBe("runner.concurrency");
    expect(field(() => new Runner({ store, agent, pollIntervalMs: -1 }))).toBe("runner.pollIntervalMs");
    expect(field(() => new Runner({ store, agent, nope: 1 } as any))).toBe("runner.nope");
    expect(field(() => new Runner({ store: {} as any, agent }))).toBe("runner.store");
    expect(field(() => new Runner({ store, agent: 42 as any }))).toBe("runner.agent");
    expect(field(() => new Runner({ store, agent: {} }))).toBe("agent");
    expect(field(() => new Runner({ store, agent, logger: {} as any }))).toBe("runner.logger");
  });
});
