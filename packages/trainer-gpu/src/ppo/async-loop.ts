import { InvalidArgumentError, type Rollout } from "@agl/core";
import {
  adaptRollout,
  CollectAbortedError,
  type CollectedRollout,
  cancelRollouts,
  groupRequests,
  waitForSome,
} from "./collect.js";
import { endStep, type LoopHooks, stepSamples, trainSeed, updatePolicy } from "./loop-support.js";
import type { PPORun } from "./run-context.js";
import { summarize, type ValidationResult } from "./run-support.js";
import { StalenessScheduler } from "./staleness-schedule.js";

/**
 * The asynchronous loop (`rollout.max_staleness` = k > 0): rollouts keep running while the optimiser
 * trains. Groups are admitted by `StalenessScheduler` (at most k versions between the version that
 * starts serving a group and the weights that train on it), each step trains the oldest finished groups,
 * and the new weights are published to the server without a proxy pause: calls in flight finish on
 * their version, later calls get the new one. Every call's span records the version that served it;
 * ppoUpdate corrects for the lag with the truncated importance weights against the recorded log-probs.
 *
 * Data order, data ids and seeds are the synchronous loop's (group g is sample g % B of step
 * floor(g / B) + 1), so k = 0 through this loop trains exactly what the synchronous loop trains.
 */

interface Group {
  sampleIndex: number;
  rolloutIds: string[];
  /** The server's version when the group was admitted. */
  admittedVersion: number;
  ended: Map<string, Rollout>;
}

export async function runAsyncLoop<T>(
  run: PPORun<T>,
  hooks: LoopHooks,
  validated: (result: ValidationResult | null) => void,
): Promise<void> {
  const { c, context, proxy, server } = run;
  const { store } = context;
  const rollout = c.actor_rollout_ref.rollout;
  const k = rollout.max_staleness;
  const B = run.batchSize;
  if (!server.publish) {
    throw new Error(
      "max_staleness > 0 needs a server that publishes weights without a stop: the default in-process server or externalEngine (not a worker pool's serve)",
    );
  }
  if (rollout.partial_rollouts && server.inFlight !== "resume") {
    throw new InvalidArgumentError(
      "config.actor_rollout_ref.rollout.partial_rollouts",
      "the serving engine cannot move generations in flight to new weights (it finishes them on their version); the default in-process server can, vLLM cannot",
    );
  }
  const publish = server.publish.bind(server);
  const schedule = new StalenessScheduler(B, k, run.step * B, run.totalSteps * B);
  const groups = new Map<number, Group>();
  const owner = new Map<string, number>();
  // The server's own version counter (it restarts at 0 when a run resumes), for staleness.
  let version = 0;

  const admit = async () => {
    const ids = schedule.admit(run.step);
    if (ids.length === 0) return;
    const requests = ids.flatMap((g) => {
      const step = Math.floor(g / B) + 1;
      const index = stepSamples(run, step).indices[g % B]!;
      return groupRequests(
        {
          n: rollout.n,
          mode: "train",
          resourcesId: "ppo-train",
          timeoutSeconds: rollout.timeout_seconds,
          seedOf: (i, r) => trainSeed(run, step, i, r),
          dataIdOf: (i) => `train-${step}-${i}`,
        },
        { index, task: run.train[index]! },
      );
    });
    const enqueued = await store.enqueueManyRollouts(requests);
    ids.forEach((g, j) => {
      const mine = enqueued.slice(j * rollout.n, (j + 1) * rollout.n);
      groups.set(g, {
        sampleIndex: Number((mine[0]!.metadata as { sample_index: number }).sample_index),
        rolloutIds: mine.map((r) => r.rollout_id),
        admittedVersion: version,
        ended: new Map(),
      });
      for (const r of mine) owner.set(r.rollout_id, g);
    });
  };

  try {
    while (run.step < run.totalSteps) {
      if (run.stop.signal.aborted) throw new CollectAbortedError();
      const next = run.step + 1;
      const t0 = performance.now();
      await admit();
      const inFlightAtStart = owner.size;
      let batch = schedule.takeBatch(next);
      while (!batch) {
        if (owner.size === 0)
          throw new Error("async PPO: a step waits for rollouts although none is running");
        const done = await waitForSome(
          store,
          new Set(owner.keys()),
          c.agentlightning.poll_interval_seconds,
          run.stop.signal,
        );
        for (const r of done) {
          const g = owner.get(r.rollout_id);
          if (g === undefined) continue;
          owner.delete(r.rollout_id);
          const group = groups.get(g)!;
          group.ended.set(r.rollout_id, r);
          if (group.ended.size === group.rolloutIds.length) schedule.finish(g);
        }
        batch = schedule.takeBatch(next);
      }
      const tGen = (performance.now() - t0) / 1000;
      // Spans of a call are written just after the agent has its answer: flush before reading them.
      await proxy.flush();
      const collected: CollectedRollout[] = [];
      const lag: number[] = [];
      for (const g of batch) {
        const group = groups.get(g)!;
        groups.delete(g);
        for (const id of group.rolloutIds) {
          const r = await adaptRollout(store, run.adapter, group.ended.get(id)!);
          collected.push(r);
          lag.push(version - (oldestServedVersion(r) ?? group.admittedVersion));
        }
      }
      const summary = summarize(collected, hooks.threshold);
      const metrics = await updatePolicy(run, collected, next, hooks);
      const tUpdate = performance.now();
      const published = await publish();
      version = typeof published === "number" ? published : version + 1;
      // An external engine may serve the new version under a new name (one LoRA adapter per version).
      if (server.servedModel) proxy.setBackendModel(server.servedModel());
      proxy.modelVersion = published;
      run.step = next;
      const seconds = (performance.now() - t0) / 1000;
      const epoch = stepSamples(run, next).epoch;
      Object.assign(metrics, stalenessMetrics(lag, k), {
        "training/reward": summary.reward,
        "training/accuracy": summary.accuracy,
        "training/n_rollouts": summary.n,
        "training/epoch": epoch,
        "async/n_rollouts_in_flight": inFlightAtStart,
        "timing_s/gen": tGen,
        "timing_s/publish": (performance.now() - tUpdate) / 1000,
        "timing_s/step": seconds,
        "perf/throughput": (metrics["training/n_tokens"] ?? 0) / seconds,
      });
      if (await endStep(run, metrics, hooks, validated)) break;
    }
  } finally {
    // Stopped early (abort, stopAfterStep, a failure): admitted rollouts must not run on later weights.
    await cancelRollouts(store, owner.keys());
  }
}

/**
 * The oldest policy version that produced a token of one of the rollout's calls (null when none recorded
 * one): a call resumed on newer weights mid-generation (partial rollouts) counts from its first version.
 */
export function oldestServedVersion(r: CollectedRollout): number | null {
  let oldest: number | null = null;
  for (const t of r.triplets) {
    const m = t.metadata as { model_version?: unknown; model_version_start?: unknown } | undefined;
    for (const v of [m?.model_version_start, m?.model_version]) {
      if (typeof v === "number" && Number.isFinite(v)) oldest = oldest === null ? v : Math.min(oldest, v);
    }
  }
  return oldest;
}

/** Staleness of a step's rollouts (versions between the oldest serving one and the trained weights). */
export function stalenessMetrics(lag: readonly number[], k: number): Record<string, number> {
  const out: Record<string, number> = {
    "async/staleness/mean": lag.length ? lag.reduce((a, b) => a + b, 0) / lag.length : 0,
    "async/staleness/max": lag.length ? Math.max(...lag) : 0,
  };
  for (let j = 0; j <= k; j++) out[`async/staleness/n_${j}`] = lag.filter((x) => x === j).length;
  return out;
}
