import { describe, expect, it } from "vitest";
import { oldestServedVersion, stalenessMetrics } from "./async-loop.js";
import type { CollectedRollout } from "./collect.js";
import { importanceWeightStats } from "./step.js";

/** The per-step numbers asynchronous training reports, against hand-computed values. */
describe("async metrics", () => {
  it("importance weights exp(old - behaviour) on trained tokens only, with the share above the cap", () => {
    const old = [
      [Math.log(0.5), Math.log(0.9), 0],
      [Math.log(0.2), 0, 0],
    ];
    const behaviour = [
      [Math.log(0.25), Math.log(0.9), -5],
      [Math.log(0.4), 0, 0],
    ];
    const mask = [
      [1, 1, 0],
      [1, 0, 0],
    ];
    const s = importanceWeightStats(old, behaviour, mask, 1.5);
    // Trained tokens: 0.5/0.25 = 2, 0.9/0.9 = 1, 0.2/0.4 = 0.5 (the masked exp(5) is ignored).
    expect(s["actor/is_weight/mean"]).toBeCloseTo(3.5 / 3, 12);
    expect(s["actor/is_weight/max"]).toBeCloseTo(2, 12);
    expect(s["actor/is_weight/min"]).toBeCloseTo(0.5, 12);
    expect(s["actor/is_weight/clip_frac"]).toBeCloseTo(1 / 3, 12);
    expect(importanceWeightStats([[0]], [[0]], [[0]], 2)).toEqual({});
  });

  it("staleness: the oldest numeric version that served a call, and a histogram up to k", () => {
    const rollout = (versions: unknown[]): CollectedRollout => ({
      rolloutId: "r",
      uid: "u",
      sampleIndex: 0,
      repeat: 0,
      status: "succeeded",
      reward: 1,
      triplets: versions.map((v) => ({
        prompt: { token_ids: [1] },
        response: { token_ids: [2] },
        reward: null,
        metadata: { model_version: v },
      })),
    });
    expect(oldestServedVersion(rollout([3, 2, 4]))).toBe(2);
    expect(oldestServedVersion(rollout(["policy-v1", null, 5]))).toBe(5);
    expect(oldestServedVersion(rollout([null]))).toBeNull();
    // A call resumed on newer weights mid-generation (partial rollouts) counts from its first version.
    const resumed = rollout([6, 5]);
    resumed.triplets[0]!.metadata = { model_version: 6, model_version_start: 3 };
    expect(oldestServedVersion(resumed)).toBe(3);
    expect(stalenessMetrics([0, 1, 1, 2], 2)).toEqual({
      "async/staleness/mean": 1,
      "async/staleness/max": 2,
      "async/staleness/n_0": 1,
      "async/staleness/n_1": 2,
      "async/staleness/n_2": 1,
    });
    expect(stalenessMetrics([], 1)).toEqual({
      "async/staleness/mean": 0,
      "async/staleness/max": 0,
      "async/staleness/n_0": 0,
      "async/staleness/n_1": 0,
    });
  });
});
