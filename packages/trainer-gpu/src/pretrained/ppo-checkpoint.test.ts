import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { savePPOCheckpoint } from "../ppo/checkpoint.js";
import type { CollectedRollout } from "../ppo/collect.js";
import { parsePPOConfig } from "../ppo/config.js";
import { AdamW } from "../ppo/optim.js";
import { SeededRandom } from "../ppo/rng.js";
import { resumeFromCheckpoint } from "../ppo/run-support.js";
import { ppoUpdate } from "../ppo/step.js";
import { oneTripletRollout } from "../ppo/test-support/rollouts.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { BaseModelView } from "./base-view.js";
import { loadPretrained } from "./load.js";
import { applyLora } from "./lora.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

/**
 * PPO on a loaded checkpoint: with LoRA only the adapters move (and only they have Adam state), the KL
 * reference is the base itself, and checkpoints hold the servable form (PEFT adapter or HF folder) from
 * which a resumed run repeats the next step exactly.
 */

let root: string;
let base: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-ppo-"));
  base = join(root, "base");
  await writeRandomCheckpoint(base, { family: "qwen3", seed: 8, vocabSize: 32, initStd: 0.1 });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const tokenizer = new Tokenizer({ chars: "abcdefgh" });
const template = new ChatTemplate(tokenizer);
const config = parsePPOConfig({
  algorithm: { adv_estimator: "grpo" },
  actor_rollout_ref: {
    rollout: { n: 2 },
    actor: {
      ppo_mini_batch_size: 2,
      ppo_epochs: 2,
      use_kl_loss: true,
      kl_loss_coef: 0.1,
      optim: { lr: 2e-2 },
    },
  },
});

function rollouts(step: number): CollectedRollout[] {
  const r = (id: string, uid: string, reward: number, response: number[]) =>
    oneTripletRollout(step, id, uid, reward, response);
  return [
    r("a", "u1", 1, [14, 15, 2]),
    r("b", "u1", 0, [16, 2]),
    r("c", "u2", 0.5, [15, 15, 2]),
    r("d", "u2", 0, [17, 2]),
  ];
}

async function fresh(lora: boolean) {
  const { model } = await loadPretrained(base);
  if (lora) applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj", "v_proj", "up_proj"], seed: 3 });
  const reference = model.frozenReference();
  const optimizer = new AdamW(model.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
  return { model, reference, optimizer, valueHead: null };
}
type Run = Awaited<ReturnType<typeof fresh>>;

const step = (m: Run, k: number) =>
  ppoUpdate(
    rollouts(k),
    config,
    { policy: m.model, reference: m.reference, optimizer: m.optimizer, valueHead: null, padId: 0 },
    new SeededRandom(k),
    4,
  );

const save = (run: Run, dir: string) =>
  savePPOCheckpoint(dir, {
    model: run.model,
    tokenizer,
    template,
    optimizer: run.optimizer.getState(),
    reference: run.reference,
    critic: null,
    state: { step: 1, history: [], config },
  });

const snapshot = (vars: readonly tf.Variable[]) => vars.map((v) => Float32Array.from(v.dataSync()));
const KEYS = ["actor/pg_loss", "actor/kl_loss", "actor/grad_norm", "actor/ppo_kl"];

describe("PPO on a loaded checkpoint", () => {
  it("LoRA: only adapters train, the reference is the frozen base, the checkpoint is a PEFT folder that resumes exactly", async () => {
    const run = await fresh(true);
    expect(run.reference).toBeInstanceOf(BaseModelView);
    expect(run.optimizer.variables).toHaveLength(2 * 2 * 3);
    const baseVars = run.model.weightNames.map((n) => run.model.variable(n));
    const before = snapshot(baseVars);
    const adaptersBefore = snapshot(run.model.trainableVariables);
    const m1 = await step(run, 1);
    expect(m1["actor/n_updates"]).toBeGreaterThan(0);
    expect(snapshot(baseVars)).toEqual(before);
    expect(snapshot(run.model.trainableVariables)).not.toEqual(adaptersBefore);
    expect(m1["actor/kl_loss"]).toBeGreaterThanOrEqual(0);

    const dir = join(root, "lora-run");
    await save(run, dir);
    const stepDir = join(dir, "global_step_1");
    expect((await readdir(join(stepDir, "actor"))).sort()).toEqual([
      "adapter_config.json",
      "adapter_model.safetensors",
    ]);
    expect(existsSync(join(stepDir, "ref"))).toBe(false);
    const expected = await step(run, 2);
    expect(expected["actor/kl_loss"]).toBeGreaterThan(0);

    const resumed = await fresh(true);
    const logger = { warn: () => {}, info: () => {} };
    await resumeFromCheckpoint(dir, { ...resumed, config, logger });
    const got = await step(resumed, 2);
    for (const key of KEYS) expect(got[key], key).toBeCloseTo(expected[key]!, 5);
    for (const r of [run, resumed]) {
      r.optimizer.dispose();
      r.model.dispose();
    }
  });

  it("full fine-tuning: the actor checkpoint is a Hugging Face folder and the reference a frozen copy", async () => {
    const run = await fresh(false);
    expect(run.reference).not.toBeInstanceOf(BaseModelView);
    expect(run.reference.trainableVariables.every((v) => !v.trainable)).toBe(true);
    await step(run, 1);
    const dir = join(root, "full-run");
    await save(run, dir);
    const actor = await readdir(join(dir, "global_step_1", "actor"));
    expect(actor).toEqual(
      expect.arrayContaining(["config.json", "generation_config.json", "model.safetensors"]),
    );
    const expected = await step(run, 2);
    const resumed = await fresh(false);
    await resumeFromCheckpoint(dir, { ...resumed, config, logger: { warn: () => {}, info: () => {} } });
    const got = await step(resumed, 2);
    for (const key of KEYS) expect(got[key], key).toBeCloseTo(expected[key]!, 5);
    for (const r of [run, resumed]) {
      r.optimizer.dispose();
      r.reference.dispose();
      r.model.dispose();
    }
  });
});
