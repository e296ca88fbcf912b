import { beforeAll, describe, expect, it } from "vitest";
import {
  aggLoss,
  aggregationWeights,
  klPenalty,
  policyLoss,
  tisWeights,
  tokenLogprobsAndEntropy,
} from "./loss.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";

let tf: Awaited<ReturnType<typeof useCpuBackend>>;
beforeAll(async () => {
  tf = await useCpuBackend();
});

const ratios = [1.5, 0.5, 1.1, 4.0];
const adv = [1, 1, -1, -1];

function run(clipHigh: number) {
  const logprob = tf.tensor2d([ratios.map(Math.log)]);
  const out = policyLoss({
    logprob,
    oldLogprob: tf.zeros([1, 4]),
    advantages: tf.tensor2d([adv]),
    weights: tf.tensor2d([aggregationWeights([[1, 1, 1, 1]], "token-mean")[0]!]),
    metricWeights: tf.tensor2d([[0.25, 0.25, 0.25, 0.25]]),
    clipLow: 0.2,
    clipHigh,
    clipC: 3,
  });
  return out;
}

describe("clipped PPO loss with dual clip", () => {
  it("matches hand-computed loss, clip fractions and approximate KL", () => {
    const out = run(0.2);
    // per token: -1.2 (clipped high), -0.5, 1.1, 3 (dual clip)
    expect(out.loss.dataSync()[0]).toBeCloseTo((-1.2 - 0.5 + 1.1 + 3) / 4, 5);
    expect(out.clipfrac.dataSync()[0]).toBeCloseTo(0.25, 6);
    expect(out.clipfracLower.dataSync()[0]).toBeCloseTo(0.25, 6);
    expect(out.ppoKl.dataSync()[0]).toBeCloseTo(-ratios.reduce((a, r) => a + Math.log(r), 0) / 4, 5);
  });

  it("uses separate low/high clip ratios", () => {
    expect(run(0.28).loss.dataSync()[0]).toBeCloseTo((-1.28 - 0.5 + 1.1 + 3) / 4, 5);
  });

  it("passes no gradient through clipped tokens", () => {
    const g = tf.grad(
      (lp: any) =>
        policyLoss({
          logprob: lp,
          oldLogprob: tf.zeros([1, 4]),
          advantages: tf.tensor2d([adv]),
          weights: tf.tensor2d([[0.25, 0.25, 0.25, 0.25]]),
          metricWeights: tf.tensor2d([[0.25, 0.25, 0.25, 0.25]]),
          clipLow: 0.2,
          clipHigh: 0.2,
          clipC: 3,
        }).loss,
    )(tf.tensor2d([ratios.map(Math.log)]));
    const d = Array.from(g.dataSync());
    for (const [i, v] of [0, -0.125, 0.275, 0].entries()) expect(d[i]).toBeCloseTo(v, 5);
  });

  it("scales per-token losses by truncated importance weights", () => {
    const w = tisWeights([[0, 0]], [[Math.log(0.5), 0]], 1.5);
    expect(w[0]![0]).toBeCloseTo(1.5, 6); // exp(0 - ln .5) = 2, capped at 1.5
    expect(w[0]![1]).toBeCloseTo(1, 6);
    const out = policyLoss({
      logprob: tf.zeros([1, 2]),
      oldLogprob: tf.zeros([1, 2]),
      advantages: tf.tensor2d([[1, 1]]),
      weights: tf.tensor2d([[0.5, 0.5]]),
      metricWeights: tf.tensor2d([[0.5, 0.5]]),
      clipLow: 0.2,
      clipHigh: 0.2,
      clipC: 3,
      tisWeights: tf.tensor2d(w),
    });
    expect(out.loss.dataSync()[0]).toBeCloseTo(-(1.5 + 1) / 2, 5);
  });
});

describe("aggregation modes", () => {
  const values = () =>
    tf.tensor2d([
      [1, 2, 3],
      [4, 5, 6],
    ]);
  const mask = [
    [1, 1, 0],
    [1, 0, 0],
  ];
  it("token-mean, seq-mean-token-sum, seq-mean-token-mean", () => {
    expect(aggLoss(values(), mask, "token-mean").dataSync()[0]).toBeCloseTo(7 / 3, 5);
    expect(aggLoss(values(), mask, "seq-mean-token-sum").dataSync()[0]).toBeCloseTo(3.5, 5);
    expect(aggLoss(values(), mask, "seq-mean-token-mean").dataSync()[0]).toBeCloseTo(2.75, 5);
  });
  it("per-rollout-mean weighs each rollout equally however many rows it has", () => {
    const v = tf.tensor2d([
      [1, 2],
      [3, 0],
      [5, 7],
    ]);
    const m = [
      [1, 1],
      [1, 0],
      [1, 1],
    ];
    // Agent Lightning v1.0: masked sum of value / (trained rows x the rollout's tokens): rollout a has
    // 3 tokens over 2 rows, b 2 tokens; 3 rows in all.
    expect(aggLoss(v, m, "per_rollout_mean", ["a", "a", "b"]).dataSync()[0]).toBeCloseTo(
      (1 + 2 + 3) / (3 * 3) + (5 + 7) / (3 * 2),
      5,
    );
    // Each rollout's weights sum to 1/rows whatever its length; a rollout without tokens gets nothing.
    const w = aggregationWeights(
      [
        [1, 1, 1, 0],
        [1, 0, 0, 0],
        [0, 0, 0, 0],
      ],
      "per_rollout_mean",
      ["a", "b", "c"],
    );
    expect(w[0]!.reduce((x, y) => x + y)).toBeCloseTo(1 / 3, 9);
    expect(w[1]!.reduce((x, y) => x + y)).toBeCloseTo(1 / 3, 9);
    expect(w[2]!.every((x) => x === 0)).toBe(true);
  });
  it("seq-mean-token-sum-norm divides token sums by rows x a constant length (VERL / Dr. GRPO)", () => {
    // masked sums 3 and 4 over 2 rows, normaliser 8 (e.g. max_response_length): (3 + 4) / (2 * 8)
    expect(aggLoss(values(), mask, "seq-mean-token-sum-norm", undefined, 8).dataSync()[0]).toBeCloseTo(
      7 / 16,
      6,
    );
    // without one, VERL's fallback: the (padded) row width, 3 here
    expect(aggLoss(values(), mask, "seq-mean-token-sum-norm").dataSync()[0]).toBeCloseTo(7 / 6, 6);
  });
  it("weights of micro-batches add up to the mini-batch aggregate", () => {
    const w = aggregationWeights(mask, "token-mean");
    expect(w.flat().reduce((a, b) => a + b)).toBeCloseTo(1, 6);
  });
});

describe("KL estimators and entropy", () => {
  it("k1/abs/k2/k3 against hand values", () => {
    const lp = tf.tensor1d([-1, -2]);
    const ref = tf.tensor1d([-2, -1]);
    const get = (t: any) => Array.from(klPenalty(lp, ref, t).dataSync());
    expect(get("kl")).toEqual([1, -1]);
    expect(get("k1")).toEqual([1, -1]);
    expect(get("abs")).toEqual([1, 1]);
    expect(get("mse")).toEqual([0.5, 0.5]);
    const k3 = get("low_var_kl");
    expect(k3[0]).toBeCloseTo(Math.exp(-1), 5);
    expect(k3[1]).toBeCloseTo(Math.E - 2, 5);
    expect(get("k3")).toEqual(k3);
  });

  it("log-probs and entropy from logits", () => {
    const logits = tf.tensor3d([
      [
        [0, 0],
        [0, Math.log(3)],
      ],
    ]);
    const { logprobs, entropy } = tokenLogprobsAndEntropy(logits, tf.tensor2d([[1, 0]], [1, 2], "int32"));
    const lp = Array.from(logprobs.dataSync());
    const ent = Array.from(entropy.dataSync());
    expect(lp[0]).toBeCloseTo(-Math.LN2, 5);
    expect(lp[1]).toBeCloseTo(Math.log(0.25), 5);
    expect(ent[0]).toBeCloseTo(Math.LN2, 5);
    expect(ent[1]).toBeCloseTo(-(0.25 * Math.log(0.25) + 0.75 * Math.log(0.75)), 5);
  });
});
