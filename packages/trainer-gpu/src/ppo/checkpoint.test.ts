import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { microModel } from "../test-support/tiny.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { savePPOCheckpoint } from "./checkpoint.js";
import type { CollectedRollout } from "./collect.js";
import { parsePPOConfig } from "./config.js";
import { AdamW } from "./optim.js";
import { SeededRandom } from "./rng.js";
import { resumeFromCheckpoint } from "./run-support.js";
import { ppoUpdate } from "./step.js";
import { oneTripletRollout } from "./test-support/rollouts.js";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import { ValueHead } from "./value-head.js";

/**
 * Resume at unit level: a GAE run checkpointed after step 1 and resumed into fresh models must give
 * the same step-2 metrics as the uninterrupted run — which needs the critic and its Adam state too.
 */

let root: string;
beforeAll(async () => {
  await useCpuBackend();
  root = mkdtempSync(join(tmpdir(), "agl-ppo-ckpt-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tokenizer = new Tokenizer({ chars: "abcdefgh" });
const template = new ChatTemplate(tokenizer);
const config = parsePPOConfig({
  algorithm: { adv_estimator: "gae", gamma: 1, lam: 0.95 },
  actor_rollout_ref: { rollout: { n: 2 }, actor: { ppo_mini_batch_size: 2, optim: { lr: 1e-2 } } },
  critic: { optim: { lr: 5e-2 }, hidden_size: 8 },
});

function rollouts(step: number): CollectedRollout[] {
  const r = (id: string, uid: string, reward: number, response: number[]) =>
    oneTripletRollout(step, id, uid, reward, response);
  return [r("a", "u1", 1, [14, 15, 2]), r("b", "u1", 0, [16, 2]), r("c", "u2", 0.5, [15, 15, 15, 2])];
}

function fresh() {
  const model = microModel(tokenizer.vocabSize, 4);
  const optimizer = new AdamW(model.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
  const valueHead = new ValueHead(8, config.critic.hidden_size, config.trainer.seed);
  return { model, optimizer, valueHead };
}

const step = (m: ReturnType<typeof fresh>, k: number) =>
  ppoUpdate(
    rollouts(k),
    config,
    { policy: m.model, reference: null, optimizer: m.optimizer, valueHead: m.valueHead, padId: 0 },
    new SeededRandom(k),
    4,
  );

const KEYS = [
  "critic/vf_loss",
  "critic/values/mean",
  "critic/advantages/max",
  "actor/pg_loss",
  "actor/grad_norm",
];

describe("PPO checkpoint with a GAE critic", () => {
  it("saves the value head and its optimizer, and a resumed run repeats step k+1 exactly", async () => {
    const straight = fresh();
    await step(straight, 1);
    const dir = join(root, "gae");
    await savePPOCheckpoint(dir, {
      model: straight.model,
      tokenizer,
      template,
      optimizer: straight.optimizer.getState(),
      reference: null,
      critic: straight.valueHead.getState(),
      state: { step: 1, history: [], config },
    });
    expect(existsSync(join(dir, "global_step_1", "critic.bin"))).toBe(true);
    const expected = await step(straight, 2);

    const resumed = fresh();
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m), info: () => {} };
    const state = await resumeFromCheckpoint(dir, { ...resumed, reference: null, config, logger });
    expect(state?.step).toBe(1);
    expect(warnings).toEqual([]);
    expect(resumed.valueHead.optimizer.step).toBe(straight.valueHead.optimizer.step - 1);
    const got = await step(resumed, 2);
    for (const key of KEYS) expect(got[key], key).toBeCloseTo(expected[key]!, 6);

    // Control: restoring everything but the critic does not reproduce step 2 (so the check above bites).
    const partial = fresh();
    await resumeFromCheckpoint(dir, { ...partial, valueHead: null, reference: null, config, logger });
    const off = await step(partial, 2);
    expect(Math.abs(off["critic/values/mean"]! - expected["critic/values/mean"]!)).toBeGreaterThan(1e-4);
  });

  it("warns, naming the keys, when resuming with a different config; and when the checkpoint has no critic", async () => {
    const run = fresh();
    const dir = join(root, "changed");
    await savePPOCheckpoint(dir, {
      model: run.model,
      tokenizer,
      template,
      optimizer: run.optimizer.getState(),
      reference: null,
      critic: null,
      state: { step: 3, history: [], config },
    });
    const changed = parsePPOConfig({
      ...JSON.parse(JSON.stringify(config)),
      trainer: { ...config.trainer, experiment_name: "other" },
      critic: { ...config.critic, optim: { lr: 1e-3 } },
    });
    const warnings: string[] = [];
    const logger = { warn: (m: string) => warnings.push(m), info: () => {} };
    await resumeFromCheckpoint(dir, { ...fresh(), reference: null, config: changed, logger });
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/no critic/);
    expect(warnings[1]).toMatch(/different config/);
    expect(warnings[1]).toContain("critic.optim.lr, trainer.experiment_name");
  });
});
