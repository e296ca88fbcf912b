import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { loadPretrainedPolicy } from "../pretrained/load-policy.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { PPO, type PPOResult } from "./algorithm.js";

/**
 * PPO end to end on a loaded Hugging Face checkpoint with a LoRA policy: a tiny random qwen3 checkpoint
 * with a real byte-level BPE tokenizer.json and the Qwen3 chat template; the agent is plain `openai` SDK
 * code calling the trainer's proxy. Reward: the share of ASCII letters in a 4-token reply (about a fifth
 * of the vocabulary at the start, so every group has signal). GRPO must raise it within a few steps.
 */

type Task = { prompt: string };
const MAX_TOKENS = 4;

const seenModels = new Set<string>();
const agent = rollout<Task>(async (task, { llm, rollout: r }) => {
  seenModels.add(llm!.model);
  const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
  const res = await client.chat.completions.create({
    model: llm!.model,
    messages: [{ role: "user", content: task.prompt }],
    max_tokens: MAX_TOKENS,
    temperature: llm!.sampling_parameters.temperature as number,
    seed: (r.metadata as { seed: number }).seed,
  });
  const text = res.choices[0]!.message.content ?? "";
  const chars = [...text];
  return chars.length === 0 ? 0 : chars.filter((ch) => /[A-Za-z]/.test(ch)).length / chars.length;
});

const tasks: Task[] = Array.from({ length: 8 }, (_, i) => ({ prompt: `write ${i}` }));
let dir: string;

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ family: "qwen3", seed: 4, name: "tiny-qwen3-rl" });
});
afterAll(() => rmSync(dirname(dir), { recursive: true, force: true }));

describe("PPO on a loaded checkpoint with LoRA", () => {
  it("raises the reward through the proxy and checkpoints the PEFT adapter", async () => {
    const policy = await loadPretrainedPolicy(dir, { lora: { rank: 8, alpha: 16 } });
    const out = join(dirname(dir), "run");
    const algorithm = new PPO<Task>({
      config: {
        data: { train_batch_size: 4, max_prompt_length: 48, max_response_length: MAX_TOKENS + 1 },
        actor_rollout_ref: {
          rollout: { n: 8, val_kwargs: { temperature: 1, n: 4 } },
          actor: { ppo_mini_batch_size: 4, optim: { lr: 2e-2 } },
        },
        trainer: {
          total_training_steps: 8,
          test_freq: 100,
          val_before_train: true,
          default_local_dir: out,
          logger: ["jsonl"],
          seed: 5,
        },
      },
      policy, // agents see the checkpoint's name by default
      handleSignals: false,
    });
    const trainer = new Trainer({
      algorithm,
      store: new InMemoryLightningStore(),
      runnerConcurrency: 32,
      pollIntervalMs: 5,
      logger: silentLogger,
    });
    const { result } = await trainer.fit<Task, PPOResult>(agent, tasks, { valDataset: tasks });
    expect(result.stepsCompleted).toBe(8);
    expect([...seenModels]).toEqual(["tiny-qwen3-rl"]);
    const rewards = result.history.map((h) => h.metrics["training/reward"]).filter((v) => v !== undefined);
    expect(rewards).toHaveLength(8);
    const first = (rewards[0]! + rewards[1]!) / 2;
    const last = (rewards[6]! + rewards[7]!) / 2;
    expect(last).toBeGreaterThan(first + 0.15);
    expect(result.finalValidation!.reward).toBeGreaterThan(result.initialValidation!.reward + 0.15);
    expect(existsSync(join(out, "global_step_8", "actor", "adapter_config.json"))).toBe(true);
    expect(policy.model.trainableVariables.every((v) => /lora_[AB]/.test(v.name))).toBe(true);
    policy.model.dispose();
  });
});
