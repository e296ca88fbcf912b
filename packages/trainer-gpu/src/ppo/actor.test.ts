import type * as tfc from "@tensorflow/tfjs-core";
import { beforeAll, describe, expect, it } from "vitest";
import { computeLogprobs, type RowTensors, type TrainablePolicy, updateActor } from "./actor.js";
import { AdamW, clipByGlobalNorm, learningRate } from "./optim.js";
import { actorOptions } from "./test-support/actor-options.js";
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

const options = actorOptions;

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

/** A bigram policy with an explicit logit table (row = current token), for hand-computed values. */
function fixedBigram(values: number[][]): TrainablePolicy & { table: tfc.Variable } {
  const table = tf.variable(tf.tensor2d(values));
  const vocab = values.length;
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

/** log softmax(z / T)[k] and the entropy of softmax(z / T), written out in plain JS. */
const handLogprob = (z: number[], k: number, T: number) =>
  z[k]! / T - Math.log(z.reduce((a, x) => a + Math.exp(x / T), 0));
const handEntropy = (z: number[], T: number) =>
  -z.reduce((a, _, k) => a + Math.exp(handLogprob(z, k, T)) * handLogprob(z, k, T), 0);

describe("rollout temperature", () => {
  const table = [
    [0, 1, 2],
    [1, 0, -1],
    [0.5, -0.5, 0],
  ];
  // prompt 0, response 2 1: transitions 0->2 and 2->1; prompt 1, response 0: 1->0.
  const tRows = [row("r1", [0], [2, 1], 1), row("r2", [1], [0], 0)];

  it("log-probs and entropies at T=0.7 are those of softmax(logits / 0.7)", () => {
    const policy = fixedBigram(table);
    const out = computeLogprobs(policy, tRows, 2, 0, 0.7);
    expect(out.logprobs[0]![0]).toBeCloseTo(handLogprob(table[0]!, 2, 0.7), 5);
    expect(out.logprobs[0]![1]).toBeCloseTo(handLogprob(table[2]!, 1, 0.7), 5);
    expect(out.logprobs[1]![0]).toBeCloseTo(handLogprob(table[1]!, 0, 0.7), 5);
    expect(out.entropy[0]![0]).toBeCloseTo(handEntropy(table[0]!, 0.7), 5);
    // concretely, not just self-consistent: 2/0.7 - log(1 + e^(1/0.7) + e^(2/0.7))
    expect(out.logprobs[0]![0]).toBeCloseTo(-0.2601, 3);
    // raw (T=1) log-probs come from the same forward, for comparison with the recorded rollout log-probs
    expect(out.rawLogprobs[0]![0]).toBeCloseTo(handLogprob(table[0]!, 2, 1), 5);
    expect(out.rawLogprobs[1]![0]).toBeCloseTo(handLogprob(table[1]!, 0, 1), 5);
  });

  /** Every response token gets advantage 1 against the given old log-probs. */
  const unitAdvantageInputs = (old: number[][]) =>
    tRows.map((r, i) => ({
      advantages: r.responseIds.map(() => 1),
      oldLogprobs: old[i]!,
      refLogprobs: null,
      tisWeights: null,
    }));

  it("the update scores the current policy at the same temperature as the old log-probs", () => {
    const policy = fixedBigram(table);
    const old = computeLogprobs(policy, tRows, 2, 0, 0.7).logprobs;
    const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const m = updateActor(
      policy,
      opt,
      tRows,
      unitAdvantageInputs(old),
      options({ temperature: 0.7, miniBatchRows: 2, microBatchRows: 2 }),
    );
    // ratio exactly 1 before the step: ppo_kl 0, and pg_loss = -mean(advantage) = -1
    expect(m["actor/ppo_kl"]).toBeCloseTo(0, 6);
    expect(m["actor/pg_loss"]).toBeCloseTo(-1, 6);
    const ent = (handEntropy(table[0]!, 0.7) + handEntropy(table[2]!, 0.7) + handEntropy(table[1]!, 0.7)) / 3;
    expect(m["actor/entropy"]).toBeCloseTo(ent, 5);
    // The same update scoring at T=1 (what the unscaled code did) sees ratios != 1 on every token.
    const raw = computeLogprobs(fixedBigram(table), tRows, 2, 0, 1).logprobs;
    for (const [k, lp] of old.flat().entries()) expect(Math.abs(lp - raw.flat()[k]!)).toBeGreaterThan(0.05);
    const unscaled = fixedBigram(table);
    const optU = new AdamW(unscaled.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const mU = updateActor(
      unscaled,
      optU,
      tRows,
      unitAdvantageInputs(old),
      options({ miniBatchRows: 2, microBatchRows: 2 }),
    );
    expect(Math.abs(mU["actor/pg_loss"] + 1)).toBeGreaterThan(0.01);
  });
});

describe("entropy bonus", () => {
  // One token 0 -> 2 with zero advantage: the loss is -c x H(softmax(table[0])) alone, whose gradient
  // on the logits z is dL/dz_j = c p_j (log p_j + H) (only row 0 of the table gets a gradient).
  const z = [0.3, -0.2, 1];
  const eRows = [row("e", [0], [2], 0)];
  const zeroAdv = [{ advantages: [0], oldLogprobs: null, refLogprobs: null, tisWeights: null }];
  const grad = (c: number) => {
    const H = handEntropy(z, 1);
    return z.map((_, j) => {
      const lp = handLogprob(z, j, 1);
      return c * Math.exp(lp) * (lp + H);
    });
  };
  const table = () => [z, [0, 0, 0], [0, 0, 0]];

  it.each([0.01, 0.5])(
    "coefficient %f: grad norm and the Adam step match the hand-computed gradient",
    (c) => {
      const policy = fixedBigram(table());
      const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-12, weightDecay: 0 });
      const m = updateActor(
        policy,
        opt,
        eRows,
        zeroAdv,
        options({ entropyCoeff: c, gradClip: 0, lr: () => 0.01 }),
      );
      const g = grad(c);
      expect(m["actor/grad_norm"]).toBeCloseTo(Math.hypot(...g), 6);
      expect(m["actor/pg_loss"]).toBeCloseTo(0, 6);
      expect(m["actor/entropy"]).toBeCloseTo(handEntropy(z, 1), 5);
      // Adam's first step moves each weight by lr against the sign of its gradient: entropy goes up.
      const after = Array.from(policy.table.dataSync());
      for (const [j, gj] of g.entries()) expect(after[j]).toBeCloseTo(z[j]! - 0.01 * Math.sign(gj), 5);
      expect(after.slice(3).every((v) => v === 0)).toBe(true);
      expect(handEntropy(after.slice(0, 3), 1)).toBeGreaterThan(handEntropy(z, 1));
    },
  );

  it("without the bonus a zero-advantage batch produces no gradient", () => {
    const policy = fixedBigram(table());
    const opt = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
    const m = updateActor(policy, opt, eRows, zeroAdv, options({ entropyCoeff: 0, gradClip: 0 }));
    expect(m["actor/grad_norm"]).toBe(0);
  });
});
