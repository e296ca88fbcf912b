import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { Generator } from "../generate/generator.js";
import { PolicyModel } from "../model/policy-model.js";
import { computeLogprobs, type RowTensors, updateActor } from "../ppo/actor.js";
import { PPO, type PPOResult } from "../ppo/algorithm.js";
import { AdamW } from "../ppo/optim.js";
import { SeededRandom } from "../ppo/rng.js";
import { actorOptions } from "../ppo/test-support/actor-options.js";
import type { TrainRow } from "../ppo/triplet-rows.js";
import { sft } from "../sft/sft.js";
import { toolTranscript } from "../test-support/tiny.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { policyLogprobs, updateActorOnWorkers } from "./data-parallel.js";
import { startPolicyWorkers } from "./pool.js";

const tokenizer = new Tokenizer();
const template = new ChatTemplate(tokenizer);
const newModel = (seed = 11, vocabSize = tokenizer.vocabSize, contextLength = 96) =>
  PolicyModel.create({ vocabSize, dModel: 32, nLayers: 2, nHeads: 4, contextLength, seed });

function maxAbsDiff(a: PolicyModel, b: PolicyModel): number {
  let worst = 0;
  for (const name of a.weightNames) {
    const x = a.variable(name).dataSync();
    const y = b.variable(name).dataSync();
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs((x[i] as number) - (y[i] as number)));
  }
  return worst;
}

let root: string;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = mkdtempSync(join(tmpdir(), "agl-parallel-"));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const data = Array.from({ length: 12 }, (_, i) => toolTranscript(i + 1, 2 * i + 3));

describe("data-parallel SFT", () => {
  it("on 2 workers equals the same micro-batching in one thread, and the unsplit batch within float tolerance", async () => {
    const serialMicro = newModel();
    const serialWhole = newModel();
    const parallel = newModel();
    const pool = await startPolicyWorkers({ model: parallel, tokenizer }, { workers: 2 });
    try {
      const common = { template, steps: 3, batchSize: 6, learningRate: 1e-2, seed: 4, progress: false };
      const a = await sft(serialMicro, data, { ...common, microBatchSize: 3 });
      const b = await sft(parallel, data, { ...common, workers: pool });
      const c = await sft(serialWhole, data, common);
      expect(maxAbsDiff(serialMicro, parallel)).toBeLessThanOrEqual(1e-5);
      b.losses.forEach((l, i) => {
        expect(l).toBeCloseTo(a.losses[i] as number, 6);
        expect(l).toBeCloseTo(c.losses[i] as number, 4);
      });
      expect(maxAbsDiff(serialWhole, parallel)).toBeLessThan(1e-4);
      // The workers hold the trained weights: their greedy sample is the main model's.
      const ids = template.encodeChat(data[0]!.messages.slice(0, 1), data[0]!.tools).ids;
      const [onWorker] = await pool.generate(1, [{ promptIds: ids, temperature: 0, maxTokens: 12 }]);
      const local = new Generator(parallel, tokenizer);
      expect(onWorker?.tokenIds).toEqual(
        (await local.generate({ promptIds: ids, temperature: 0, maxTokens: 12 })).tokenIds,
      );
    } finally {
      await pool.close();
      for (const m of [serialMicro, serialWhole, parallel]) m.dispose();
    }
  });
});

describe("the calc-agent's policy shape: tied embeddings and a tokenizer with pieces", () => {
  it("replicates exactly: seeded samples and a data-parallel SFT step equal one thread", async () => {
    const pieced = new Tokenizer({
      chars: "0123456789+-*= abcdefhilnorstuw?.",
      pieces: ["12", "34", "the ", "answer"],
    });
    const tied = (seed: number) =>
      PolicyModel.create({
        vocabSize: pieced.vocabSize,
        dModel: 32,
        nLayers: 1,
        nHeads: 2,
        contextLength: 48,
        seed,
        tieEmbeddings: true,
      });
    const serialModel = tied(6);
    const model = tied(6);
    const piecedTemplate = new ChatTemplate(pieced);
    const pool = await startPolicyWorkers({ model, tokenizer: pieced }, { workers: 2 });
    try {
      const prompt = piecedTemplate.encodeChat([{ role: "user", content: "12+34?" }]).ids;
      const req = { promptIds: prompt, seed: 9, maxTokens: 12 };
      const local = await new Generator(model, pieced).generate(req);
      const [remote] = await pool.generate(1, [req]);
      expect(remote?.tokenIds).toEqual(local.tokenIds);
      expect(remote?.text).toBe(local.text);
      const demos = [12, 34, 56, 78].map((n) => ({
        messages: [
          { role: "user" as const, content: `${n}+1?` },
          { role: "assistant" as const, content: `the answer is ${n + 1}.` },
        ],
      }));
      const common = { template: piecedTemplate, steps: 2, batchSize: 4, seed: 1, progress: false };
      await sft(serialModel, demos, { ...common, microBatchSize: 2 });
      await sft(model, demos, { ...common, workers: pool });
      expect(maxAbsDiff(serialModel, model)).toBeLessThanOrEqual(1e-5);
    } finally {
      await pool.close();
      serialModel.dispose();
      model.dispose();
    }
  });
});

describe("data-parallel PPO actor update", () => {
  const rng = new SeededRandom(3);
  const V = 20;
  const rows: TrainRow[] = Array.from({ length: 8 }, (_, i) => {
    const promptIds = Array.from({ length: 3 + (i % 3) }, () => 1 + rng.int(V - 1));
    const responseIds = Array.from({ length: 2 + (i % 4) }, () => 1 + rng.int(V - 1));
    return {
      rolloutId: `r${i >> 1}`,
      uid: `u${i >> 2}`,
      score: i % 3,
      promptIds,
      responseIds,
      responseMask: responseIds.map((_, t) => (t === 1 ? 0 : 1)),
      rolloutLogprobs: null,
      isDrop: false,
      responseTruncated: false,
    };
  });
  const inputs: RowTensors[] = rows.map((r, i) => ({
    advantages: r.responseIds.map((_, t) => ((i + t) % 3) - 1),
    oldLogprobs: r.responseIds.map(() => -3),
    refLogprobs: r.responseIds.map(() => -2.5),
    tisWeights: null,
  }));
  const options = () =>
    actorOptions({
      microBatchRows: 2,
      epochs: 2,
      shuffle: true,
      rng: new SeededRandom(8),
      clipHigh: 0.28,
      temperature: 0.8,
      entropyCoeff: 0.01,
      useKlLoss: true,
      klLossCoef: 0.1,
      lr: () => 1e-2,
    });

  const adam = (m: PolicyModel) =>
    new AdamW(m.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 });

  it("old log-probs and micro-batch gradients on 2 workers give the serial values, update and metrics", async () => {
    const serial = newModel(2, V, 16);
    const parallel = newModel(2, V, 16);
    const pool = await startPolicyWorkers(
      { model: parallel, tokenizer: new Tokenizer({ chars: "abcdefghi" }) },
      { workers: 2 },
    );
    try {
      const lpA = computeLogprobs(serial, rows, 3, 0, 0.8);
      const lpB = await policyLogprobs({ policy: parallel, workers: pool }, rows, 3, 0, 0.8);
      expect(lpB).toEqual(lpA);
      const mA = updateActor(serial, adam(serial), rows, inputs, options());
      const mB = await updateActorOnWorkers(pool, adam(parallel), rows, inputs, options());
      expect(mB["actor/n_updates"]).toBe(4);
      expect(maxAbsDiff(serial, parallel)).toBeLessThanOrEqual(1e-5);
      for (const [k, v] of Object.entries(mA)) expect(mB[k as keyof typeof mB]).toBeCloseTo(v, 5);
    } finally {
      await pool.close();
      serial.dispose();
      parallel.dispose();
    }
  });
});

describe("PPO with workers", () => {
  type Task = { prompt: string };
  const abTokenizer = new Tokenizer({ chars: "ab" });
  const abTemplate = new ChatTemplate(abTokenizer);
  const agent = rollout<Task>(async (task, { llm, rollout: r }) => {
    const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
    const res = await client.chat.completions.create({
      model: llm!.model,
      messages: [{ role: "user", content: task.prompt }],
      max_tokens: 4,
      seed: (r.metadata as { seed: number }).seed,
    });
    return [...(res.choices[0]!.message.content ?? "")].filter((ch) => ch === "a").length / 4;
  });
  const tasks: Task[] = Array.from({ length: 4 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));

  async function fit(dir: string, withWorkers: boolean): Promise<{ result: PPOResult; model: PolicyModel }> {
    const model = PolicyModel.create({
      vocabSize: abTokenizer.vocabSize,
      dModel: 32,
      nLayers: 1,
      nHeads: 2,
      contextLength: 32,
      seed: 3,
    });
    const policy = { model, tokenizer: abTokenizer, template: abTemplate };
    const workers = withWorkers ? await startPolicyWorkers(policy, { workers: 2 }) : undefined;
    try {
      const algorithm = new PPO<Task>({
        config: {
          data: { train_batch_size: 2, max_prompt_length: 24, max_response_length: 6 },
          actor_rollout_ref: {
            rollout: { n: 4 },
            actor: { ppo_mini_batch_size: 2, ppo_micro_batch_size_per_gpu: 4, optim: { lr: 1e-2 } },
          },
          trainer: {
            total_training_steps: 2,
            test_freq: 100,
            val_before_train: false,
            default_local_dir: dir,
            logger: ["jsonl"],
            seed: 5,
          },
          agentlightning: { poll_interval_seconds: 0.05 },
        },
        policy,
        workers,
        handleSignals: false,
      });
      const trainer = new Trainer({
        algorithm,
        store: new InMemoryLightningStore(),
        runnerConcurrency: 8,
        pollIntervalMs: 5,
        logger: silentLogger,
      });
      const { result } = await trainer.fit<Task, PPOResult>(agent, tasks);
      return { result, model };
    } finally {
      await workers?.close();
    }
  }

  it("generation and actor gradients on workers reproduce the single-thread run", async () => {
    const serial = await fit(join(root, "serial"), false);
    const parallel = await fit(join(root, "parallel"), true);
    expect(parallel.result.stepsCompleted).toBe(2);
    const pick = (r: PPOResult) =>
      r.history.map((h) => [h.metrics["training/reward"], h.metrics["agent_mode/n_sample_to_train"]]);
    expect(pick(parallel.result)).toEqual(pick(serial.result));
    expect(maxAbsDiff(serial.model, parallel.model)).toBeLessThanOrEqual(1e-5);
    serial.model.dispose();
    parallel.model.dispose();
  });
});
