import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { emitReward, InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { loadPretrainedPolicy } from "../pretrained/load-policy.js";
import { addLoraAdapter } from "../pretrained/lora.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { PPO, type PPOResult } from "./algorithm.js";

/**
 * Two policies trained in one run through the proxy: a tiny random qwen3 checkpoint with two LoRA adapters
 * ("writer", "checker") and an untrained role ("judge", the frozen base). Each rollout calls all three
 * through their own LLM resources; the writer is rewarded for letters, the checker for digits (opposite
 * directions from one base), each through `emitReward(x, { policy })`. GRPO must move both adapters their
 * own way.
 */

type Task = { prompt: string };
const MAX_TOKENS = 4;
const share = (text: string, re: RegExp) => {
  const chars = [...text];
  return chars.length === 0 ? 0 : chars.filter((ch) => re.test(ch)).length / chars.length;
};

const seen = new Set<string>();
let phase = 0;
const val: Array<{ phase: number; writer: number; checker: number }> = [];
const agent = rollout<Task>(async (task, { resources, rollout: r }) => {
  const ask = async (resource: string) => {
    const llm = resources[resource] as {
      endpoint: string;
      model: string;
      api_key?: string;
      sampling_parameters: any;
    };
    seen.add(`${resource}=${llm.model}`);
    const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 6 });
    const res = await client.chat.completions.create({
      model: llm.model,
      messages: [{ role: "user", content: task.prompt }],
      max_tokens: MAX_TOKENS,
      temperature: llm.sampling_parameters.temperature as number,
    });
    return res.choices[0]!.message.content ?? "";
  };
  const writer = share(await ask("writer_llm"), /[A-Za-z]/);
  emitReward(writer, { policy: "writer" });
  const checker = share(await ask("checker_llm"), /[0-9]/);
  emitReward(checker, { policy: "checker" });
  await ask("judge_llm");
  if (r.mode === "val") val.push({ phase, writer, checker });
  return (writer + checker) / 2;
});

const tasks: Task[] = Array.from({ length: 8 }, (_, i) => ({ prompt: `write ${i}` }));
let dir: string;

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ family: "qwen3", seed: 4, name: "tiny-qwen3-roles" });
});
afterAll(() => rmSync(dirname(dir), { recursive: true, force: true }));

describe("PPO with one LoRA adapter per role", () => {
  it("trains each adapter on its own calls and rewards, checkpoints each adapter and its optimizer", async () => {
    const policy = await loadPretrainedPolicy(dir);
    addLoraAdapter(policy.model, "writer", { rank: 8, alpha: 16, seed: 1 });
    addLoraAdapter(policy.model, "checker", { rank: 8, alpha: 16, seed: 2 });
    const out = join(dirname(dir), "run");
    // 12 steps, not 8: at 8 the checker's gain ranged 0.06-0.49 between runs (batch composition under load
    // changes the samples), too close to the 0.1 bar; at 12 it clears it by far.
    const steps = 12;
    const algorithm = new PPO<Task>({
      config: {
        data: { train_batch_size: 4, max_prompt_length: 48, max_response_length: MAX_TOKENS + 1 },
        actor_rollout_ref: {
          rollout: { n: 8, val_kwargs: { temperature: 1, n: 4 } },
          actor: { ppo_mini_batch_size: 4, optim: { lr: 2e-2 } },
        },
        trainer: {
          total_training_steps: steps,
          test_freq: 100,
          val_before_train: true,
          default_local_dir: out,
          logger: ["jsonl"],
          seed: 5,
        },
      },
      policy,
      policies: {
        writer: { reward: "own" },
        checker: { reward: "own" },
        judge: { train: false, adapter: null },
      },
      onStep: (step) => {
        if (step === steps) phase = 1;
      },
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
    expect(result.stepsCompleted).toBe(steps);
    expect([...seen].sort()).toEqual(["checker_llm=checker", "judge_llm=judge", "writer_llm=writer"]);
    const last = result.history.at(-1)!.metrics;
    expect(last["policy/writer/n_rollouts"]).toBe(32);
    expect(last["policy/checker/n_rollouts"]).toBe(32);
    expect(last["policy/judge/n_rollouts"]).toBeUndefined();
    const mean = (p: number, k: "writer" | "checker") => {
      const xs = val.filter((v) => v.phase === p).map((v) => v[k]);
      return xs.reduce((a, b) => a + b, 0) / xs.length;
    };
    // Each adapter learned its own behaviour from the same base.
    expect(mean(1, "writer")).toBeGreaterThan(mean(0, "writer") + 0.1);
    expect(mean(1, "checker")).toBeGreaterThan(mean(0, "checker") + 0.1);
    const ckpt = join(out, `global_step_${steps}`);
    for (const name of ["writer", "checker"]) {
      expect(existsSync(join(ckpt, "actor", name, "adapter_config.json"))).toBe(true);
      expect(existsSync(join(ckpt, "policy_optim", `${name}.bin`))).toBe(true);
    }
    policy.model.dispose();
  }, 400_000);
});
