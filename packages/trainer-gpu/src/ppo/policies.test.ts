import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Triplet } from "@agl/core";
import type * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { AdapterView } from "../pretrained/adapter-view.js";
import { loadPretrained } from "../pretrained/load.js";
import { addLoraAdapter } from "../pretrained/lora.js";
import { restorePolicyFiles, savePolicyFiles } from "../pretrained/policy-files.js";
import type { PretrainedModel } from "../pretrained/pretrained-model.js";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";
import { MICRO_ARCH } from "../test-support/tiny-pretrained.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { grpoAdvantages } from "./advantages.js";
import type { CollectedRollout } from "./collect.js";
import { parsePPOConfig } from "./config.js";
import { PolicySet, policyBatch, sharedAdapterBatch } from "./policies.js";
import { SeededRandom } from "./rng.js";

let root: string;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-policies-"));
  await writeRandomCheckpoint(join(root, "base"), {
    family: "qwen3",
    seed: 2,
    vocabSize: 64,
    ...MICRO_ARCH,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const call = (
  policy: string,
  response: number[],
  reward: number | null = null,
  rewardPolicy?: string,
): Triplet => ({
  prompt: { token_ids: [1, 5, 6] },
  response: { token_ids: response },
  reward,
  metadata: { policy, ...(rewardPolicy ? { reward_policy: rewardPolicy } : {}) },
});
const rollout = (id: string, uid: string, triplets: Triplet[], reward: number | null): CollectedRollout => ({
  rolloutId: id,
  uid,
  sampleIndex: 0,
  repeat: 0,
  status: "succeeded",
  reward,
  triplets,
});

const config = parsePPOConfig({
  data: { train_batch_size: 2, max_prompt_length: 8, max_response_length: 4 },
  actor_rollout_ref: { rollout: { n: 2 }, actor: { ppo_mini_batch_size: 2, optim: { lr: 5e-2 } } },
  trainer: { total_training_steps: 1 },
});

async function twoPolicyModel(): Promise<PretrainedModel> {
  const { model } = await loadPretrained(join(root, "base"));
  addLoraAdapter(model, "planner", { rank: 2, seed: 1 });
  addLoraAdapter(model, "checker", { rank: 2, seed: 2 });
  return model;
}
const snapshot = (vars: readonly tf.Variable[]) => vars.map((v) => Float32Array.from(v.dataSync()));

describe("multi-policy credit assignment", () => {
  // Sample s0, three rollouts. r1: planner (rewarded 1 for the planner), checker, final reward 0.5;
  // r2: planner only, final 0; r3: checker only, rewarded 1 for the checker, final 0.2.
  const rollouts = [
    rollout("r1", "s0", [call("planner", [7], 1, "planner"), call("checker", [8], 0.5)], 0.5),
    rollout("r2", "s0", [call("planner", [9], 0)], 0),
    rollout("r3", "s0", [call("checker", [10], 0.2), call("checker", [11], 1, "checker")], 1),
  ];

  it("a policy trains only on rollouts where it called, with the final or its own reward", () => {
    const own = (p: string) => policyBatch(rollouts, p, "own", "drop");
    const final = (p: string) => policyBatch(rollouts, p, "final", "drop");
    expect([...own("planner").rewards]).toEqual([
      ["r1", 1],
      ["r2", 0],
    ]);
    expect([...own("checker").rewards]).toEqual([
      ["r1", 0.5], // no checker-scoped reward in r1: the final reward
      ["r3", 1],
    ]);
    expect([...final("planner").rewards]).toEqual([
      ["r1", 0.5],
      ["r2", 0],
    ]);
    // r3's final reward is its last unscoped one (0.2), not the checker's own 1.
    expect([...final("checker").rewards]).toEqual([
      ["r1", 0.5],
      ["r3", 0.2],
    ]);
    expect(own("planner").rollouts.flatMap((r) => r.triplets.map((t) => t.metadata.policy))).toEqual([
      "planner",
      "planner",
    ]);
    expect(policyBatch(rollouts, "executor", "final", "drop").rollouts).toEqual([]);
  });

  it("GRPO advantages are normalised within each policy's own group (hand computation)", () => {
    // planner, own credit: scores [1, 0] in group s0 → mean 0.5, unbiased std sqrt(0.5) → ±0.5/0.70711.
    const planner = policyBatch(rollouts, "planner", "own", "drop");
    const adv = grpoAdvantages([...planner.rewards.values()], ["s0", "s0"]);
    expect(adv[0]).toBeCloseTo(0.5 / Math.sqrt(0.5), 5);
    expect(adv[1]).toBeCloseTo(-0.5 / Math.sqrt(0.5), 5);
    // checker, final credit: scores [0.5, 0.2] → ±0.15/sqrt(0.045); had r2 (no checker call) counted as a
    // 0 the group would be [0.5, 0, 0.2].
    const checker = policyBatch(rollouts, "checker", "final", "drop");
    const cadv = grpoAdvantages([...checker.rewards.values()], ["s0", "s0"]);
    expect(cadv[0]).toBeCloseTo(0.15 / Math.sqrt(0.045), 4);
    expect(cadv[1]).toBeCloseTo(-0.15 / Math.sqrt(0.045), 4);
  });
});

describe("PolicySet", () => {
  it("a step with calls of one role changes its adapter only: the other adapter and the base stay bitwise equal", async () => {
    const model = await twoPolicyModel();
    const set = new PolicySet(model, { planner: {}, checker: {} }, config);
    const plannerOnly = [
      rollout("a", "s0", [call("planner", [7, 8])], 1),
      rollout("b", "s0", [call("planner", [9, 3])], 0),
    ];
    const planner = set.entries[0]!.view!.trainableVariables;
    const checker = set.entries[1]!.view!.trainableVariables;
    const base = model.weightNames.map((n) => model.variable(n));
    const [p0, c0, b0] = [snapshot(planner), snapshot(checker), snapshot(base)];
    const metrics = await set.update(plannerOnly, config, 0, new SeededRandom(1), 1);
    expect(metrics["policy/planner/n_rollouts"]).toBe(2);
    expect(metrics["policy/checker/n_rollouts"]).toBe(0);
    expect(snapshot(checker)).toEqual(c0);
    expect(snapshot(base)).toEqual(b0);
    expect(snapshot(planner).some((v, i) => v.some((x, j) => x !== p0[i]![j]))).toBe(true);
    // And the other way round.
    const p1 = snapshot(planner);
    await set.update(
      [rollout("c", "s1", [call("checker", [4, 4])], 1), rollout("d", "s1", [call("checker", [5, 6])], 0)],
      config,
      0,
      new SeededRandom(2),
      1,
    );
    expect(snapshot(planner)).toEqual(p1);
    expect(snapshot(checker).some((v, i) => v.some((x, j) => x !== c0[i]![j]))).toBe(true);
    set.dispose();
    model.dispose();
  });

  it("checkpoint and resume restore every adapter and its own optimizer state", async () => {
    const model = await twoPolicyModel();
    const set = new PolicySet(
      model,
      { planner: {}, checker: { reward: "own" }, judge: { train: false, adapter: null } },
      config,
    );
    await set.update(
      [
        rollout("a", "s0", [call("planner", [7, 8]), call("checker", [3])], 1),
        rollout("b", "s0", [call("planner", [9, 3]), call("checker", [2])], 0),
      ],
      config,
      0,
      new SeededRandom(1),
      1,
    );
    const dir = join(root, "ckpt");
    await savePolicyFiles(join(dir, "actor"), model, { tokenizer: new Tokenizer() });
    await set.save(dir);
    const fresh = await twoPolicyModel();
    const resumed = new PolicySet(
      fresh,
      { planner: {}, checker: { reward: "own" }, judge: { train: false, adapter: null } },
      config,
    );
    await restorePolicyFiles(join(dir, "actor"), fresh);
    await resumed.restore(dir);
    for (const i of [0, 1]) {
      expect(snapshot(resumed.entries[i]!.view!.trainableVariables)).toEqual(
        snapshot(set.entries[i]!.view!.trainableVariables),
      );
      const want = set.entries[i]!.optimizer!.getState();
      const got = resumed.entries[i]!.optimizer!.getState();
      expect(got.step).toBe(1);
      expect(got.step).toBe(want.step);
      expect(got.m).toEqual(want.m);
      expect(got.v).toEqual(want.v);
    }
    expect(resumed.entries[2]!.optimizer).toBeNull();
    expect(resumed.proxyRoutes("base", { planner: "planner-v3" })).toEqual({
      planner: { policy: "planner", model: "planner-v3" },
      checker: { policy: "checker", model: "checker" },
      judge: { policy: "judge", model: "base" },
    });
    expect(resumed.resourceNames()).toEqual({
      planner_llm: "planner",
      checker_llm: "checker",
      judge_llm: "judge",
    });
    for (const s of [set, resumed]) s.dispose();
    model.dispose();
    fresh.dispose();
  });

  it("declaring a policy the model has no adapter for is a typed error naming it", async () => {
    const model = await twoPolicyModel();
    expect(() => new PolicySet(model, { executor: {} }, config)).toThrow(
      /policies.executor.*no LoRA adapter "executor"/,
    );
    expect(() => new PolicySet(model, { judge: { adapter: null } }, config)).toThrow(/needs an adapter/);
    model.dispose();
  });

  it("roles sharing one adapter train it with one optimizer; each role's calls keep their reward and group", async () => {
    const model = await twoPolicyModel();
    addLoraAdapter(model, "shared", { rank: 2, seed: 3 });
    const specs = {
      planner: { adapter: "shared", reward: "own" as const },
      checker: { adapter: "shared", reward: "own" as const },
    };
    const set = new PolicySet(model, specs, config);
    expect(set.groups.map((g) => g.key)).toEqual(["planner+checker"]);
    expect(set.entries[0]!.optimizer).toBe(set.entries[1]!.optimizer);
    // Sample s0: the planner is rewarded [1, 0], the checker [0, 1] (own credit): grouped per role, each
    // call's advantage is its role's ±0.5/sqrt(0.5); pooled in one group they would all be 0-centred
    // over [1, 0, 0, 1] and the same, but r1's two calls would share one rollout id and one reward.
    const step = [
      rollout("r1", "s0", [call("planner", [7], 1, "planner"), call("checker", [8], 0, "checker")], 0),
      rollout("r2", "s0", [call("planner", [9], 0, "planner"), call("checker", [6], 1, "checker")], 0),
    ];
    const batch = sharedAdapterBatch(
      ["planner", "checker"].map((p) => [p, policyBatch(step, p, "own", "drop")] as const),
    );
    expect(batch.rollouts.map((r) => [r.rolloutId, r.uid, r.triplets.map((t) => t.metadata.policy)])).toEqual(
      [
        ["r1#planner", "s0#planner", ["planner"]],
        ["r2#planner", "s0#planner", ["planner"]],
        ["r1#checker", "s0#checker", ["checker"]],
        ["r2#checker", "s0#checker", ["checker"]],
      ],
    );
    const scores = batch.rollouts.map((r) => batch.rewards.get(r.rolloutId)!);
    expect(scores).toEqual([1, 0, 0, 1]);
    const adv = grpoAdvantages(
      scores,
      batch.rollouts.map((r) => r.uid),
    );
    const a = 0.5 / Math.sqrt(0.5);
    for (const [i, want] of [a, -a, -a, a].entries()) expect(adv[i]).toBeCloseTo(want, 5);

    // One update moves the shared adapter only; the per-role adapters and the base stay bitwise equal.
    const others = ["planner", "checker"].map((n) => new AdapterView(model, n).trainableVariables);
    const shared = set.groups[0]!.view.trainableVariables;
    const base = model.weightNames.map((n) => model.variable(n));
    const [s0, b0] = [snapshot(shared), snapshot(base)];
    const o0 = others.map(snapshot);
    const metrics = await set.update(step, config, 0, new SeededRandom(1), 1);
    expect(metrics["policy/planner/n_rollouts"]).toBe(2);
    expect(metrics["policy/checker/n_rollouts"]).toBe(2);
    expect(metrics["policy/planner/reward_mean"]).toBe(0.5);
    expect(metrics["policy/planner+checker/agent_mode/n_sample_to_train"]).toBe(4);
    expect(set.groups[0]!.optimizer.getState().step).toBe(1);
    expect(snapshot(base)).toEqual(b0);
    expect(others.map(snapshot)).toEqual(o0);
    expect(snapshot(shared).some((v, i) => v.some((x, j) => x !== s0[i]![j]))).toBe(true);

    // Its optimizer state is saved once, under the roles' joined names, and restored.
    const dir = join(root, "ckpt-shared");
    await set.save(dir);
    const again = new PolicySet(model, specs, config);
    await again.restore(dir);
    expect(again.groups[0]!.optimizer.getState().m).toEqual(set.groups[0]!.optimizer.getState().m);
    // An untrained role cannot run on an adapter another role trains (its calls would change under it).
    expect(
      () =>
        new PolicySet(
          model,
          { planner: { adapter: "shared" }, judge: { adapter: "shared", train: false } },
          config,
        ),
    ).toThrow(/policies.judge.*trained by another policy/);
    for (const s of [set, again]) s.dispose();
    model.dispose();
  });
});
