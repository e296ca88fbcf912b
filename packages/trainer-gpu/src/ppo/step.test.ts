import { beforeAll, describe, expect, it } from "vitest";
import { PolicyModel } from "../model/policy-model.js";
import type { CollectedRollout } from "./collect.js";
import { type PPOConfigInput, parsePPOConfig } from "./config.js";
import { AdamW } from "./optim.js";
import { SeededRandom } from "./rng.js";
import { mapStepRewards, ppoUpdate, trainingRewards } from "./step.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import { ValueHead } from "./value-head.js";

beforeAll(async () => {
  await useCpuBackend();
});

const triplet = (prompt: number[], response: number[], reward: number | null) => ({
  prompt: { token_ids: prompt },
  response: { token_ids: response, logprobs: response.map(() => -2) },
  reward,
  metadata: {},
});

/** Two samples x 3 rollouts; sample "a" has a 2-call rollout; sample "b" is all-equal (zero variance). */
function rollouts(): CollectedRollout[] {
  const r = (id: string, uid: string, reward: number, calls = 1): CollectedRollout => ({
    rolloutId: id,
    uid,
    sampleIndex: uid === "a" ? 0 : 1,
    repeat: 0,
    status: "succeeded",
    reward,
    triplets:
      calls === 1
        ? [triplet([1, 2], [3, 4], reward)]
        : [triplet([1, 2], [3, 4], null), triplet([1, 2, 3, 4, 5], [6, 7], reward)],
  });
  return [
    r("a1", "a", 1, 2),
    r("a2", "a", 0),
    r("a3", "a", 0),
    r("b1", "b", 1),
    r("b2", "b", 1),
    r("b3", "b", 1),
    { ...r("c1", "c", 1), status: "failed" },
  ];
}

async function run(over: PPOConfigInput) {
  const config = parsePPOConfig({
    ...over,
    actor_rollout_ref: {
      rollout: { n: 3 },
      actor: { ppo_mini_batch_size: 2, ...over.actor_rollout_ref?.actor },
    },
  });
  const policy = PolicyModel.create({
    vocabSize: 10,
    dModel: 8,
    nLayers: 1,
    nHeads: 2,
    contextLength: 16,
    seed: 1,
  });
  const needRef = config.actor_rollout_ref.actor.use_kl_loss || config.algorithm.use_kl_in_reward;
  const reference = needRef ? policy.clone({ trainable: false }) : null;
  const optimizer = new AdamW(policy.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
  const valueHead = config.algorithm.adv_estimator === "gae" ? new ValueHead(8, 8, 1) : null;
  const before = Array.from(policy.trainableVariables[0]!.dataSync());
  const metrics = await ppoUpdate(
    rollouts(),
    config,
    { policy, reference, optimizer, valueHead, padId: 0 },
    new SeededRandom(1),
    10,
  );
  const moved = Array.from(policy.trainableVariables[0]!.dataSync()).some((v, i) => v !== before[i]);
  return { metrics, moved };
}

describe("ppoUpdate wiring", () => {
  it("defaults as Agent Lightning: failed rollouts train with reward 0, same-reward groups stay", async () => {
    const { metrics, moved } = await run({
      agentlightning: { trace_aggregator: { level: "transition" } },
      actor_rollout_ref: { actor: { ppo_mini_batch_size: 3 } },
    });
    expect(moved).toBe(true);
    expect(metrics["training/n_rollouts_failed"]).toBe(1);
    expect(metrics["training/n_rollouts_dropped"]).toBe(0);
    expect(metrics["training/n_triplets"]).toBe(8);
    expect(metrics["training/n_rows_skipped_zero_variance"]).toBe(0);
    expect(metrics["agent_mode/n_sample_to_train"]).toBe(8);
    // rows: a1 x2 (1), a2 (0), a3 (0), b1-b3 (1), c1 (failed: 0, though its triplet says 1)
    expect(metrics["critic/score/mean"]).toBeCloseTo(5 / 8, 9);
  });

  it("trainingRewards: triplet reward, else the reward span, else 0; failed -> 0 or dropped", async () => {
    const base = rollouts();
    const noTripletReward: CollectedRollout = {
      ...base[1]!,
      rolloutId: "late",
      reward: 0.5,
      triplets: [triplet([1], [2], null)],
    };
    const all = [...base, noTripletReward, { ...base[2]!, rolloutId: "gone", status: "cancelled" as const }];
    const zero = trainingRewards(all, "zero_reward");
    expect(Object.fromEntries(zero)).toEqual({ a1: 1, a2: 0, a3: 0, b1: 1, b2: 1, b3: 1, c1: 0, late: 0.5 });
    expect(trainingRewards(all, "drop").has("c1")).toBe(false);
  });

  it("mapRewards: a shuffled-reward control trains on the mapped rewards; bad output is a typed error", async () => {
    const config = parsePPOConfig({ actor_rollout_ref: { rollout: { n: 3 } } });
    const rng = new SeededRandom(3);
    const mapped = mapStepRewards(rollouts(), config, (r, info) => info.rng.shuffle([...r]), {
      step: 1,
      rng,
    });
    const earned = trainingRewards(rollouts(), "zero_reward");
    expect([...mapped.keys()]).toEqual([...earned.keys()]);
    expect([...mapped.values()].sort()).toEqual([...earned.values()].sort());
    expect(() => mapStepRewards(rollouts(), config, () => [1], { step: 1, rng })).toThrow(/mapRewards/);
    expect(() =>
      mapStepRewards(rollouts(), config, (r) => r.map(() => Number.NaN), { step: 1, rng }),
    ).toThrow(/mapRewards\[0\]/);
  });

  it("old behaviour on request: skips zero-variance groups and drops failed rollouts", async () => {
    const { metrics, moved } = await run({
      algorithm: { skip_zero_variance_groups: true },
      agentlightning: { trace_aggregator: { level: "transition" }, failed_rollouts: "drop" },
    });
    expect(moved).toBe(true);
    expect(metrics["training/n_rollouts_failed"]).toBe(1);
    expect(metrics["training/n_triplets"]).toBe(7);
    expect(metrics["training/n_rows_skipped_zero_variance"]).toBe(3);
    expect(metrics["agent_mode/n_sample_to_train"]).toBe(4);
    expect(metrics["actor/n_updates"]).toBe(1);
  });

  it("trajectory mode merges the two-call rollout into one row", async () => {
    const { metrics } = await run({
      algorithm: { skip_zero_variance_groups: true },
      agentlightning: { trace_aggregator: { level: "trajectory" }, failed_rollouts: "drop" },
    });
    expect(metrics["agent_mode/n_sample_to_train"]).toBe(3);
    expect(metrics["training/n_trajectory_prefix_mismatch"]).toBe(0);
  });

  it.each([
    ["rloo", {}],
    ["reinforce_plus_plus", {}],
    ["gae", {}],
    ["grpo", { use_kl_in_reward: true, kl_penalty: "low_var_kl" }],
  ] as const)("%s runs end to end with finite metrics", async (estimator, extra) => {
    const { metrics, moved } = await run({
      algorithm: { adv_estimator: estimator, ...extra },
      actor_rollout_ref: { actor: { use_kl_loss: true, tis_imp_ratio_cap: 2, entropy_coeff: 0.01 } },
    });
    expect(moved).toBe(true);
    for (const [k, v] of Object.entries(metrics)) expect(Number.isFinite(v), k).toBe(true);
    expect(metrics).toHaveProperty(["actor/kl_loss"]);
    if (estimator === "gae") expect(metrics).toHaveProperty(["critic/vf_loss"]);
    if ("use_kl_in_reward" in extra) expect(metrics["actor/reward_kl_penalty"]).toBeCloseTo(0, 6);
  });
});

describe("KL penalty in the reward", () => {
  it("with a reference that differs from the policy: hand-computed penalty and GRPO advantages", async () => {
    const beta = 0.5;
    const config = parsePPOConfig({
      algorithm: {
        adv_estimator: "grpo",
        use_kl_in_reward: true,
        kl_penalty: "kl",
        kl_ctrl: { kl_coef: beta },
        skip_zero_variance_groups: true,
      },
      actor_rollout_ref: { rollout: { n: 3 }, actor: { ppo_mini_batch_size: 2 } },
      agentlightning: { trace_aggregator: { level: "transition" }, failed_rollouts: "drop" },
    });
    const make = (seed: number) =>
      PolicyModel.create({ vocabSize: 10, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 16, seed });
    const policy = make(1);
    const reference = make(2);
    // Independent of the trainer's packing: the model's own next-token log-probs on each full sequence.
    const diffs = (seq: number[], promptLength: number) => {
      const lp = policy.tokenLogProbs([seq]).arraySync()[0]!;
      const ref = reference.tokenLogProbs([seq]).arraySync()[0]!;
      return lp.slice(promptLength - 1).map((v, t) => v - ref[promptLength - 1 + t]!);
    };
    const short = diffs([1, 2, 3, 4], 2); // rows of a1 (first call), a2, a3
    const long = diffs([1, 2, 3, 4, 5, 6, 7], 5); // a1's second call
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    expect(Math.abs(sum(short)) + Math.abs(sum(long))).toBeGreaterThan(1e-3); // the reference really differs

    const optimizer = new AdamW(policy.trainableVariables, {
      betas: [0.9, 0.999],
      eps: 1e-8,
      weightDecay: 0,
    });
    const metrics = await ppoUpdate(
      rollouts(),
      config,
      { policy, reference, optimizer, valueHead: null, padId: 0 },
      new SeededRandom(1),
      10,
    );
    expect(metrics["agent_mode/n_sample_to_train"]).toBe(4);
    expect(metrics["actor/reward_kl_penalty"]).toBeCloseTo((3 * sum(short) + sum(long)) / 8, 5);
    expect(metrics["actor/reward_kl_penalty_coeff"]).toBe(beta);
    // Row scores: the rollout's reward at the last token plus -beta x KL on every token, then GRPO over
    // the 4 rows of sample "a" (unbiased std, epsilon 1e-6).
    const scores = [1 - beta * sum(short), 1 - beta * sum(long), -beta * sum(short), -beta * sum(short)];
    const m = scores.reduce((a, b) => a + b, 0) / 4;
    const sd = Math.sqrt(scores.reduce((a, s) => a + (s - m) ** 2, 0) / 3);
    const adv = scores.map((s) => (s - m) / (sd + 1e-6));
    expect(metrics["critic/advantages/max"]).toBeCloseTo(Math.max(...adv), 4);
    expect(metrics["critic/advantages/min"]).toBeCloseTo(Math.min(...adv), 4);
    // the penalty changes advantages, not the reported score
    expect(metrics["critic/score/mean"]).toBeCloseTo(0.5, 6);
  });
});
