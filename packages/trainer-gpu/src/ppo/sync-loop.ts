import { CollectAbortedError, collectRollouts } from "./collect.js";
import {
  endStep,
  followServedModels,
  type LoopHooks,
  stepSamples,
  trainSeed,
  updatePolicy,
} from "./loop-support.js";
import type { PPORun } from "./run-context.js";
import { pauseForUpdate, summarize, type ValidationResult } from "./run-support.js";

/**
 * The synchronous loop (`max_staleness: 0`), Agent Lightning's VERL data flow: enqueue the step's
 * samples `rollout.n` times each, wait for all of them, pause the proxy, update, swap the new weights
 * into the server, resume, validate/checkpoint. Every rollout is sampled by the weights of the step
 * before the one that trains on it.
 */
export async function runSyncLoop<T>(
  run: PPORun<T>,
  hooks: LoopHooks,
  validated: (result: ValidationResult | null) => void,
): Promise<void> {
  const { c, context, proxy, server } = run;
  const rollout = c.actor_rollout_ref.rollout;
  while (run.step < run.totalSteps) {
    if (run.stop.signal.aborted) throw new CollectAbortedError();
    const next = run.step + 1;
    const t0 = performance.now();
    const { epoch, indices } = stepSamples(run, next);
    const collected = await collectRollouts({
      store: context.store,
      adapter: run.adapter,
      samples: indices.map((index) => ({ index, task: run.train[index]! })),
      n: rollout.n,
      mode: "train",
      resourcesId: "ppo-train",
      timeoutSeconds: rollout.timeout_seconds,
      pollSeconds: c.agentlightning.poll_interval_seconds,
      seedOf: (i, r) => trainSeed(run, next, i, r),
      dataIdOf: (i) => `train-${next}-${i}`,
      signal: run.stop.signal,
      beforeAdapt: () => proxy.flush(),
    });
    const tGen = (performance.now() - t0) / 1000;
    // No call may be sampled while weights change: the proxy turns new calls away (429 + Retry-After,
    // which SDKs retry) and drains its in-flight calls (their spans written), and the server drains
    // running generations before the update runs.
    const pauseMetrics = await pauseForUpdate(proxy, context.logger);
    const summary = summarize(collected, hooks.threshold);
    let metrics: Record<string, number> = {};
    const version = await server.swapWeights(async () => {
      metrics = await updatePolicy(run, collected, next, hooks);
    });
    // An external engine may serve the new version under a new name (one LoRA adapter per version):
    // every call from here on asks for it.
    followServedModels(run);
    await proxy.resume({ modelVersion: version });
    run.step = next;
    const seconds = (performance.now() - t0) / 1000;
    Object.assign(metrics, pauseMetrics, {
      "training/reward": summary.reward,
      "training/accuracy": summary.accuracy,
      "training/n_rollouts": summary.n,
      "training/epoch": epoch,
      "timing_s/gen": tGen,
      "timing_s/step": seconds,
      "perf/throughput": (metrics["training/n_tokens"] ?? 0) / seconds,
    });
    if (await endStep(run, metrics, hooks, validated)) break;
  }
}
