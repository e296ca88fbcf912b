import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { silentLogger } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { MetricsRecord } from "./metrics-log.js";
import { type ServeFn, type ServeOptions, type ServingHandle, servePolicy } from "./serving.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import { type TinyRunOptions, tinyRun } from "./test-support/tiny-run.js";
import { weightsDigest } from "./test-support/weights-digest.js";

/**
 * Asynchronous PPO end to end on the tiny run: with no lag it trains exactly what the synchronous loop
 * trains; with max_staleness 1 rollouts overlap training, the lag stays within the bound, and a problem
 * whose rollouts always finish last is still trained on, every time.
 */

let root: string;
beforeAll(async () => {
  await useCpuBackend();
  root = mkdtempSync(join(tmpdir(), "agl-ppo-async-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** The metrics that do not depend on timing or on which loop ran. */
function trainedMetrics(history: MetricsRecord[]) {
  return history.map(({ step, metrics }) => ({
    step,
    metrics: Object.fromEntries(
      Object.entries(metrics).filter(([k]) => !/^(timing_s|perf|async|proxy_)/.test(k)),
    ),
  }));
}

const run = (name: string, o: Partial<TinyRunOptions>) =>
  tinyRun({ dir: join(root, name), steps: 3, logger: silentLogger, ...o });

describe("asynchronous PPO", () => {
  it("with no lag the asynchronous loop trains exactly what the synchronous loop trains", async () => {
    const actor = { tis_imp_ratio_cap: 2 };
    const sync = await run("sync", { actor });
    const asyncRun = await run("async0", { actor, loop: "async" });
    expect(asyncRun.result.stepsCompleted).toBe(3);
    expect(trainedMetrics(asyncRun.result.history)).toEqual(trainedMetrics(sync.result.history));
    expect(weightsDigest(asyncRun.result.checkpointDir!)).toBe(weightsDigest(sync.result.checkpointDir!));
    for (const { metrics } of asyncRun.result.history) {
      expect(metrics["async/staleness/max"]).toBe(0);
      expect(metrics["actor/is_weight/mean"]).toBeGreaterThan(0);
    }
  });

  it("max_staleness 1: a problem whose rollouts always finish last is trained every time, lag <= 1", async () => {
    // Sample 0's rollouts hold on after their LLM call until no other agent is running: they are always
    // the last of what is admitted, and under k = 1 the steps before their deadline train other groups.
    let others = 0;
    let waiters: Array<() => void> = [];
    const slow = 0;
    const steps = 6;
    const { result, store } = await run("slow", {
      steps,
      actor: { tis_imp_ratio_cap: 2 },
      rollout: { max_staleness: 1 },
      runnerConcurrency: 8,
      beforeCall: ({ sampleIndex }) => {
        if (sampleIndex !== slow) others++;
      },
      afterCall: async ({ sampleIndex, signal }) => {
        if (sampleIndex !== slow) {
          others--;
          const wake = waiters;
          waiters = [];
          for (const w of wake) w();
          return;
        }
        while (others > 0 && !signal.aborted) await new Promise<void>((r) => waiters.push(r));
      },
    });
    expect(result.stepsCompleted).toBe(steps);
    const history = result.history.filter((h) => "training/n_rollouts" in h.metrics);
    // Every step trained a full batch (2 groups x 2 rollouts); no rollout was dropped or failed.
    for (const { metrics } of history) {
      expect(metrics["training/n_rollouts"]).toBe(4);
      expect(metrics["training/n_rollouts_dropped"]).toBe(0);
      expect(metrics["async/staleness/max"]).toBeLessThanOrEqual(1);
    }
    // Training overlapped sampling: some rollouts were trained one version after the one that served them.
    expect(history.reduce((a, h) => a + (h.metrics["async/staleness/n_1"] ?? 0), 0)).toBeGreaterThan(0);
    // Every rollout of the slow problem ran to the end (none cancelled) and all rollouts admitted were trained.
    const train = (await store.queryRollouts({})).items.filter((r) =>
      String((r.metadata as { data_id?: string }).data_id).startsWith("train-"),
    );
    expect(train).toHaveLength(steps * 4);
    expect(train.every((r) => r.status === "succeeded")).toBe(true);
    const slowOnes = train.filter((r) => (r.metadata as { sample_index: number }).sample_index === slow);
    expect(slowOnes.length).toBeGreaterThan(0);
  });

  it("partial_rollouts: the in-process engine is asked to resume generations in flight; an engine that cannot is refused", async () => {
    const asked: ServeOptions[] = [];
    const handles: ServingHandle[] = [];
    const recording: ServeFn = async (policy, options) => {
      asked.push(options);
      const handle = await servePolicy(policy, options);
      handles.push(handle);
      return handle;
    };
    const rollout = { max_staleness: 1, partial_rollouts: true };
    const { result } = await run("partial", { actor: { tis_imp_ratio_cap: 2 }, rollout, serve: recording });
    expect(result.stepsCompleted).toBe(3);
    expect(asked.map((o) => [o.publication, o.inFlight])).toEqual([["snapshot", "resume"]]);
    expect(handles[0]!.inFlight).toBe("resume");
    for (const { metrics } of result.history.filter((h) => "training/n_rollouts" in h.metrics)) {
      expect(metrics["async/staleness/max"]).toBeLessThanOrEqual(1);
    }

    // An engine that publishes but finishes every request on its version (as vLLM does) cannot do it.
    const finishing: ServeFn = async (policy, options) => ({
      ...(await servePolicy(policy, { ...options, inFlight: "finish" })),
    });
    await expect(
      run("partial-refused", { actor: { tis_imp_ratio_cap: 2 }, rollout, serve: finishing }),
    ).rejects.toThrow(/partial_rollouts: the serving engine cannot move generations in flight/);
  });
});
