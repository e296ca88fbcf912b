import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { PolicyModel } from "../model/policy-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PPO, type PPOResult } from "./algorithm.js";
import type { PPOConfigInput } from "./config.js";

/**
 * End to end on a trivially learnable task: a tiny random policy over the alphabet {a, b} is asked to
 * "write"; the reward is the share of "a"s in its 4-token reply. The agent is plain `openai` SDK code
 * calling the trainer's proxy; GRPO must raise the reward within a few steps.
 */

type Task = { prompt: string };

const agent = rollout<Task>(async (task, { llm, rollout: r }) => {
  const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
  const res = await client.chat.completions.create({
    model: llm!.model,
    messages: [{ role: "user", content: task.prompt }],
    max_tokens: 4,
    temperature: llm!.sampling_parameters.temperature as number,
    seed: (r.metadata as { seed: number }).seed,
  });
  const text = res.choices[0]!.message.content ?? "";
  return [...text].filter((ch) => ch === "a").length / 4;
});

const tokenizer = new Tokenizer({ chars: "ab" });
const template = new ChatTemplate(tokenizer);
const tasks: Task[] = Array.from({ length: 8 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));

function newPolicy() {
  return {
    model: PolicyModel.create({
      vocabSize: tokenizer.vocabSize,
      dModel: 32,
      nLayers: 1,
      nHeads: 2,
      contextLength: 32,
      seed: 3,
    }),
    tokenizer,
    template,
  };
}

function config(
  dir: string,
  overrides: Partial<Record<"steps" | "valBefore", unknown>> = {},
): PPOConfigInput {
  return {
    data: { train_batch_size: 4, max_prompt_length: 24, max_response_length: 6 },
    actor_rollout_ref: {
      rollout: { n: 8, val_kwargs: { temperature: 1, n: 4 } },
      actor: { ppo_mini_batch_size: 4, optim: { lr: 1e-2 } },
    },
    trainer: {
      total_training_steps: (overrides.steps as number) ?? 8,
      test_freq: 100,
      val_before_train: (overrides.valBefore as boolean) ?? true,
      default_local_dir: dir,
      logger: ["jsonl"],
      seed: 5,
    },
  };
}

async function fit(
  dir: string,
  opts: { steps: number; stopAfterStep?: number; valBefore?: boolean },
): Promise<PPOResult> {
  const algorithm = new PPO<Task>({
    config: config(dir, { steps: opts.steps, valBefore: opts.valBefore }),
    policy: newPolicy(),
    handleSignals: false,
    stopAfterStep: opts.stopAfterStep,
  });
  const trainer = new Trainer({
    algorithm,
    store: new InMemoryLightningStore(),
    runnerConcurrency: 32,
    pollIntervalMs: 5,
    logger: silentLogger,
  });
  const { result } = await trainer.fit<Task, PPOResult>(agent, tasks, { valDataset: tasks });
  return result;
}

let root: string;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = mkdtempSync(join(tmpdir(), "agl-ppo-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("PPO end to end", () => {
  it("raises the reward of a tiny policy, logging metrics, a plot and a checkpoint", async () => {
    const dir = join(root, "learn");
    const result = await fit(dir, { steps: 8 });
    expect(result.stepsCompleted).toBe(8);
    const rewards = result.history.map((h) => h.metrics["training/reward"]).filter((v) => v !== undefined);
    expect(rewards).toHaveLength(8);
    const first = (rewards[0]! + rewards[1]!) / 2;
    const last = (rewards[6]! + rewards[7]!) / 2;
    expect(last).toBeGreaterThan(first + 0.2);
    expect(result.finalValidation!.reward).toBeGreaterThan(result.initialValidation!.reward + 0.2);

    const lines = readFileSync(join(dir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const step1 = lines.find((l) => l.step === 1 && l["training/reward"] !== undefined);
    for (const key of [
      "actor/pg_clipfrac",
      "actor/ppo_kl",
      "actor/entropy",
      "actor/grad_norm",
      "training/n_triplets",
    ]) {
      expect(step1).toHaveProperty([key]);
    }
    expect(step1["training/n_triplets"]).toBe(32);
    expect(readFileSync(result.plotPath, "utf8")).toMatch(/^<svg[\s\S]*training reward[\s\S]*<\/svg>$/);
    expect(existsSync(join(dir, "global_step_8", "actor", "policy.json"))).toBe(true);
  });

  it("resuming after step k gives the same steps k+1, k+2 as an uninterrupted run", async () => {
    const straight = await fit(join(root, "straight"), { steps: 4, valBefore: false });
    const resumedDir = join(root, "resumed");
    const part = await fit(resumedDir, { steps: 4, stopAfterStep: 2, valBefore: false });
    expect(part.stepsCompleted).toBe(2);
    const rest = await fit(resumedDir, { steps: 4, valBefore: false });
    expect(rest.stepsCompleted).toBe(4);
    // Step 4's rollouts are sampled from weights that step 3's Adam update (moments restored) produced.
    for (const step of [3, 4]) {
      const pick = (r: PPOResult) => r.history.find((h) => h.step === step)!.metrics;
      const a = pick(straight);
      const b = pick(rest);
      for (const key of [
        "training/reward",
        "actor/pg_loss",
        "actor/grad_norm",
        "actor/entropy",
        "critic/advantages/max",
      ]) {
        expect(b[key], `step ${step} ${key}`).toBeCloseTo(a[key]!, 5);
      }
    }
  });
});
