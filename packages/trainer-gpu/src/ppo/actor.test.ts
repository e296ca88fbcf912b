import type * as tfc from "@tensorflow/tfjs-core";
import { beforeAll, describe, expect, it } from "vitest";
import { computeLogprobs, type RowTensors, type TrainablePolicy, updateActor } from "./actor.js";
import { AdamW, clipByGlobalNorm, learningRate } from "./optim.js";
import { SeededRandom } from "./rng.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import type { TrainRow } from "./triplet-rows.js";

let tf: typeof tfc;
beforeAll(async () => {
  tf = await useCpuBackend();
});

/** A bigram "policy": logits of the next token depend only on the current one. */
function bigram(vocab: number, seed = 1): TrainablePolicy & { table: tfc.Variable } {
  const table = tf.variable(tf.randomNormal([vocab, vocab], 0, 0.1, "float32", seed));
  return {
    table,
    trainableVariables: [table],
    logits: (ids) =>
      tf.tidy(() => {
        const [B, L] = ids.shape;
        const onehot = tf.oneHot(tf.reshape(ids, [-1]), vocab);
        return tf.reshape(tf.matMul(onehot, table), [B, L, vocab]) as tfc.Tensor3D;
      }),
  };
}

const row = (id: string, prompt: number[], response: number[], score: number): TrainRow => ({
  rolloutId: id,
  uid: "u",
  score,
  promptIds: prompt,
  responseIds: response,
  responseMask: response.map(() => 1),
  rolloutLogprobs: null,
  isDrop: false,
  responseTruncated: false,
});

const options = (
  over: Partial<Parameters<typeof updateActor>[4]> = {},
): Parameters<typeof updateActor>[4] => ({
  miniBatchRows: 4,
  microBatchRows: 4,
  epochs: 1,
  shuffle: false,
  rng: new SeededRandom(1),
  padId: 0,
  clipLow: 0.2,
  clipHigh: 0.2,
  clipC: 3,
  aggMode: "token-mean",
  entropyCoeff: 0,
  useKlLoss: false,
  klLossCoef: 0,
  klLossType: "low_var_kl",
  gradClip: 1,
  lr: () => 0.05,
  ...over,
});

describe("optimizer pieces", () => {
  it("schedules warm-up then constant/cosine/linear decay", () => {
    const o = { lr: 1, warmupSteps: 2, totalSteps: 12, minLrRatio: 0.1 };
    expect(learningRate(1, { ...o, style: "constant" })).toBe(0.5);
    expect(learningRate(2, { ...o, style: "constant" })).toBe(1);
    expect(learningRate(7, { ...o, style: "constant" })).toBe(1);
    expect(learningRate(7, { ...o, style: "cosine" })).toBeCloseTo(0.1 + 0.9 * 0.5, 6);
    expect(learningRate(12, { ...o, style: "linear" })).toBeCloseTo(0.1, 6);
  });

  it("clips gradients to a global norm", () => {
    const { grads, norm } = clipByGlobalNorm([tf.tensor1d([3]), tf.tensor1d([4])], 1);
    expect(norm).toBeCloseTo(5, 5);
    expect(grads[0]!.dataSync()[0]).toBeCloseTo(0.6, 4);
    expect(grads[1]!.dataSync()[0]).toBeCloseTo(0.8, 4);
  });

  it("Adam's first step moves each weight by lr (sign of the gradient), plus decoupled weight decay", () => {
    const x = tf.variable(tf.tensor1d([1, -2]));
    const opt = new AdamW([x], { betas: [0.9, 0.999], eps: 1e-12, weightDecay: 0.1 });
    opt.apply([tf.tensor1d([0.5, -3])], 0.01);
    const v = Array.from(x.dataSync());
    expect(v[0]).toBeCloseTo(1 - 0.01 - 0.01 * 0.1 * 1, 6);
    expect(v[1]).toBeCloseTo(-2 + 0.01 - 0.01 * 0.1 * -2, 6);
    const state = opt.getState();
    const y = tf.variable(tf.tensor1d([0, 0]));
    const opt2 = new AdamW([y], { betas: [0.9, 0.999], eps: 1e-12, weightDecay: 0 });
    opt2.setState(state);
    expect(opt2.step).toBe(1);
    expect(Array.from(opt2.getState().m[0]!)).toEqual(Array.from(state.m[0]!));
  });
});

describe("actor update", () => {
  const rows = [
    row("r1", [1], [2, 3], 1),
    row("r2", [1], [3, 3], 0),
    row("r3", [1, 2], [4], 1),
    row("r4", [4], [1], 0),
  ];
  const inputs = (policy: TrainablePolicy): RowTensors[] => {
    const { logprobs } = computeLogprobs(policy, rows, 2, 0);
    return rows.map((r, i) => ({
      advantages: r.responseIds.map(() => (r.score ? 1 : -1)),
      oldLogprobs: logprobs[i]!,
      refLogprobs: null,
      tisWeights: null,
    }));
  };

  it("raises the log-probs of positive-advantage responses and lowers the negative ones", () => {
    const policy = bigram(6);
    const before = computeLogprobs(policy, rows, 4, 0).logprobs;
    const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const m = updateActor(policy, opt, rows, inputs(policy), options());
    const after = computeLogprobs(policy, rows, 4, 0).logprobs;
    expect(after[0]![0]).toBeGreaterThan(before[0]![0]!); // 1 -> 2 rewarded
    expect(after[1]![1]).toBeLessThan(before[1]![1]!); // 3 -> 3 punished
    expect(m["actor/n_updates"]).toBe(1);
    expect(m["actor/ppo_kl"]).toBeCloseTo(0, 6); // old == current before the first step
    expect(m["actor/grad_norm"]).toBeGreaterThan(0);
    expect(m["actor/entropy"]).toBeGreaterThan(0);
  });

  it("gradient accumulation over micro-batches equals one full-batch step", () => {
    const a = bigram(6, 3);
    const b = bigram(6, 3);
    const optA = new AdamW(a.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const optB = new AdamW(b.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const mA = updateActor(a, optA, rows, inputs(a), options({ microBatchRows: 4, gradClip: 0 }));
    const mB = updateActor(b, optB, rows, inputs(b), options({ microBatchRows: 1, gradClip: 0 }));
    const wa = Array.from(a.table.dataSync());
    const wb = Array.from(b.table.dataSync());
    for (const [i, v] of wa.entries()) expect(v).toBeCloseTo(wb[i]!, 5);
    expect(mA["actor/pg_loss"]).toBeCloseTo(mB["actor/pg_loss"], 5);
    expect(mA["actor/grad_norm"]).toBeCloseTo(mB["actor/grad_norm"], 4);
  });

  it("splits into mini-batches (one optimizer step each) and reports clip fractions after the first", () => {
    const policy = bigram(6, 5);
    const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const m = updateActor(
      policy,
      opt,
      rows,
      inputs(policy),
      options({ miniBatchRows: 2, epochs: 2, lr: () => 0.5 }),
    );
    expect(m["actor/n_updates"]).toBe(4);
    expect(opt.step).toBe(4);
    expect(m["actor/pg_clipfrac"]).toBeGreaterThan(0);
  });

  it("the on-policy shortcut (old = current, detached) gives the same step as recomputed old log-probs", () => {
    const a = bigram(6, 9);
    const b = bigram(6, 9);
    const optA = new AdamW(a.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const optB = new AdamW(b.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    updateActor(a, optA, rows, inputs(a), options());
    updateActor(
      b,
      optB,
      rows,
      inputs(b).map((x) => ({ ...x, oldLogprobs: null })),
      options(),
    );
    const wa = Array.from(a.table.dataSync());
    const wb = Array.from(b.table.dataSync());
    for (const [i, v] of wa.entries()) expect(v).toBeCloseTo(wb[i]!, 5);
  });

  it("KL loss to a reference pulls toward it and is reported", () => {
    const policy = bigram(6, 11);
    const ref = bigram(6, 12);
    const refLp = computeLogprobs(ref, rows, 4, 0).logprobs;
    const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const m = updateActor(
      policy,
      opt,
      rows,
      inputs(policy).map((x, i) => ({ ...x, advantages: x.advantages.map(() => 0), refLogprobs: refLp[i]! })),
      options({ useKlLoss: true, klLossCoef: 1, klLossType: "mse" }),
    );
    expect(m["actor/kl_loss"]).toBeGreaterThan(0);
    const klBefore = m["actor/kl_loss"];
    const after = computeLogprobs(policy, rows, 4, 0).logprobs;
    const mse =
      after.flat().reduce((s, lp, k) => s + 0.5 * (lp - refLp.flat()[k]!) ** 2, 0) / after.flat().length;
    expect(mse).toBeLessThan(klBefore);
  });
});
