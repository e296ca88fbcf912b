import { existsSync } from "node:fs";
import { cp, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import type { CausalLM } from "../model/causal-lm.js";
import { PPO, type PPOResult } from "../ppo/algorithm.js";
import type { PPOConfigInput } from "../ppo/config.js";
import type { ServeFn } from "../ppo/serving.js";
import { loadPretrained } from "../pretrained/load.js";
import { applyLora } from "../pretrained/lora.js";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { externalEngine } from "./external-engine.js";
import { ReloadHookSync } from "./reload-hook-sync.js";
import { type EngineEvent, type FakeVllm, startFakeVllm } from "./test-support/fake-vllm.js";
import { VllmLoraSync } from "./vllm-lora-sync.js";
import { WeightSyncError } from "./weight-sync.js";

/**
 * PPO with an external inference engine (a vLLM stand-in that really generates with the weights it
 * was given): LoRA adapters synced through vLLM's runtime adapter API, full weights through a
 * checkpoint and a reload hook. The engine must serve exactly the trainer's weights after each update,
 * and every rollout after a swap must be served by the new version.
 */

const tokenizer = new Tokenizer({ chars: "ab" });
const template = new ChatTemplate(tokenizer);
let root: string;
let baseDir: string;

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-engine-"));
  baseDir = join(root, "base");
  await writeRandomCheckpoint(baseDir, {
    family: "qwen2",
    seed: 4,
    vocabSize: tokenizer.vocabSize,
    hiddenSize: 16,
    numLayers: 1,
    numHeads: 2,
    numKvHeads: 1,
    maxPositionEmbeddings: 64,
    initStd: 0.2,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

/** log p of a fixed reply under `model`: equal for two models only if they compute the same function. */
function probe(model: CausalLM): Float32Array {
  return tf.tidy(() => model.tokenLogProbs([[1, 3, 4, 3, 3, 4, 2]]).dataSync() as Float32Array);
}

function ppoConfig(dir: string, steps: number, maxStaleness = 0): PPOConfigInput {
  return {
    data: { train_batch_size: 2, max_prompt_length: 24, max_response_length: 4 },
    actor_rollout_ref: {
      rollout: { n: 3, max_staleness: maxStaleness },
      actor: { ppo_mini_batch_size: 2, optim: { lr: 5e-2 }, tis_imp_ratio_cap: 2 },
    },
    trainer: {
      total_training_steps: steps,
      test_freq: 100,
      val_before_train: false,
      default_local_dir: dir,
      logger: ["jsonl"],
      seed: 3,
    },
    agentlightning: { poll_interval_seconds: 0.05 },
  };
}

const agent = rollout<{ prompt: string }>(async (task, { llm, rollout: r }) => {
  const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
  const res = await client.chat.completions.create({
    model: llm!.model,
    messages: [{ role: "user", content: task.prompt }],
    max_tokens: 3,
    seed: (r.metadata as { seed: number }).seed,
  });
  return [...(res.choices[0]!.message.content ?? "")].filter((ch) => ch === "a").length / 3;
});
const tasks = Array.from({ length: 4 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));

async function train(policyModel: CausalLM, serve: ServeFn, dir: string, steps: number, maxStaleness = 0) {
  const metrics: Array<Record<string, number>> = [];
  const algorithm = new PPO<{ prompt: string }>({
    config: ppoConfig(dir, steps, maxStaleness),
    policy: { model: policyModel, tokenizer, template },
    serve,
    handleSignals: false,
    onStep: (_, m) => metrics.push(m),
  });
  const trainer = new Trainer({
    algorithm,
    store: new InMemoryLightningStore(),
    runnerConcurrency: 3 * (maxStaleness + 1),
    pollIntervalMs: 5,
    logger: silentLogger,
  });
  const { result } = await trainer.fit<{ prompt: string }, PPOResult>(agent, tasks);
  return { result, metrics };
}

describe("the vLLM stand-in speaks vLLM's adapter API", () => {
  let engine: FakeVllm;
  let adapter: string;
  beforeAll(async () => {
    engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    const { model } = await loadPretrained(baseDir);
    applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj", "v_proj"] });
    const sync = new VllmLoraSync({ url: `${engine.url}/v1`, adapterDir: join(root, "probe-adapters") });
    await sync.start({ model, tokenizer, template });
    adapter = join(root, "probe-adapters", "policy-v0");
    model.dispose();
  });
  afterAll(async () => {
    await engine.close();
  });

  it("refuses what vLLM refuses", async () => {
    expect(engine.adapters()).toEqual(["policy-v0"]);
    const again = await post(`${engine.url}/v1/load_lora_adapter`, {
      lora_name: "policy-v0",
      lora_path: adapter,
    });
    expect(again.status).toBe(400);
    expect((await again.json()).error.message).toMatch(/already been loaded/);
    const missing = await post(`${engine.url}/v1/load_lora_adapter`, {
      lora_name: "x",
      lora_path: join(root, "nope"),
    });
    expect(missing.status).toBe(404);
    const noName = await post(`${engine.url}/v1/load_lora_adapter`, { lora_name: "", lora_path: adapter });
    expect(noName.status).toBe(400);
    // Not a PEFT folder this base can take: a rank over --max-lora-rank, a missing tensor.
    const bad = join(root, "bad-adapter");
    await rm(bad, { recursive: true, force: true });
    await cp(adapter, bad, { recursive: true });
    const cfg = JSON.parse(await readFile(join(bad, "adapter_config.json"), "utf8"));
    await writeFile(join(bad, "adapter_config.json"), JSON.stringify({ ...cfg, r: 64 }));
    const tooBig = await post(`${engine.url}/v1/load_lora_adapter`, { lora_name: "big", lora_path: bad });
    expect([tooBig.status, (await tooBig.json()).error.message]).toEqual([
      500,
      expect.stringMatching(/max_lora_rank/),
    ]);
    await writeFile(
      join(bad, "adapter_config.json"),
      JSON.stringify({ ...cfg, target_modules: ["q_proj", "v_proj", "k_proj"] }),
    );
    const partial = await post(`${engine.url}/v1/load_lora_adapter`, {
      lora_name: "partial",
      lora_path: bad,
    });
    expect([partial.status, (await partial.json()).error.message]).toEqual([
      500,
      expect.stringMatching(/missing tensor/),
    ]);
    expect(engine.adapters()).toEqual(["policy-v0"]);

    const unknown = await post(`${engine.url}/v1/unload_lora_adapter`, { lora_name: "nope" });
    expect(unknown.status).toBe(404);
    const chat = await post(`${engine.url}/v1/chat/completions`, {
      model: "nope",
      messages: [{ role: "user", content: "a" }],
    });
    expect([chat.status, (await chat.json()).error.message]).toEqual([
      404,
      "The model `nope` does not exist.",
    ]);
    const models = (await (await fetch(`${engine.url}/v1/models`)).json()).data.map(
      (m: { id: string; parent: string | null }) => [m.id, m.parent],
    );
    expect(models).toEqual([
      ["base", null],
      ["policy-v0", "base"],
    ]);
  });

  it("without runtime LoRA updating the routes are absent, and the sync says why it failed", async () => {
    const locked = await startFakeVllm({ baseDir, tokenizer, template, runtimeLoraUpdating: false });
    try {
      const { model } = await loadPretrained(baseDir);
      applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj"] });
      const sync = new VllmLoraSync({ url: locked.url, adapterDir: join(root, "locked") });
      const error = await sync.start({ model, tokenizer, template }).catch((e) => e);
      expect(WeightSyncError.isInstance(error)).toBe(true);
      expect((error as WeightSyncError).status).toBe(404);
      expect((error as Error).message).toMatch(/VLLM_ALLOW_RUNTIME_LORA_UPDATING/);
      const full = await loadPretrained(baseDir);
      await expect(sync.start({ model: full.model, tokenizer, template })).rejects.toThrow(/LoRA adapters/);
      model.dispose();
      full.model.dispose();
    } finally {
      await locked.close();
    }
  });
});

describe("PPO on an external engine", () => {
  it("LoRA: a new adapter per policy version, every rollout after a swap served by it, engine weights = trainer weights", async () => {
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    const adapterDir = join(root, "adapters");
    try {
      const { model } = await loadPretrained(baseDir);
      applyLora(model, { rank: 4, alpha: 8, targetModules: ["q_proj", "v_proj", "up_proj"], seed: 1 });
      const before = probe(model);
      const serve = externalEngine({
        url: `${engine.url}/v1`,
        weightSync: new VllmLoraSync({ url: engine.url, adapterDir }),
      });
      // Keep the engine's last adapter after training to compare it with the trainer's weights.
      const steps = 3;
      const { result, metrics } = await train(model, serve, join(root, "ppo-lora"), steps);
      expect(result.stepsCompleted).toBe(steps);

      // Loads and unloads in order: v0 at start, then each version replaces the previous one.
      const lifecycle = engine.events.filter((e) => e.type !== "serve").map((e) => `${e.type} ${e.name}`);
      expect(lifecycle).toEqual([
        "load policy-v0",
        "load policy-v1",
        "unload policy-v0",
        "load policy-v2",
        "unload policy-v1",
        "load policy-v3",
        "unload policy-v2",
        "unload policy-v3",
      ]);
      // Every generation was served by the adapter loaded last before it (never the base, never a
      // retired version), each version served one step's rollouts, none failed.
      let current: string | null = null;
      const servedBy = new Map<string, number>();
      for (const e of engine.events as EngineEvent[]) {
        if (e.type === "load") current = e.name;
        if (e.type === "serve") {
          expect(e.status).toBe(200);
          expect(e.model).toBe(current);
          servedBy.set(e.model, (servedBy.get(e.model) ?? 0) + 1);
        }
      }
      expect([...servedBy.entries()]).toEqual([
        ["policy-v0", 6],
        ["policy-v1", 6],
        ["policy-v2", 6],
      ]);
      // The engine's log-probs were the rollout log-probs: truncated IS had them for every row.
      for (const m of metrics) expect(m["training/n_rows_without_rollout_logprobs"]).toBeUndefined();
      expect(metrics.every((m) => m["actor/n_updates"]! > 0)).toBe(true);
      // Folders of retired versions are gone; what the engine served last is what the trainer holds.
      expect(existsSync(join(adapterDir, "policy-v0"))).toBe(false);
      expect(await readdir(adapterDir)).toEqual([]);
      expect(probe(model)).not.toEqual(before);
      model.dispose();
    } finally {
      await engine.close();
    }
  });

  it("LoRA, max_staleness 1: versions published while calls run; the previous adapter stays until no call uses it", async () => {
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    const adapterDir = join(root, "adapters-async");
    try {
      const { model } = await loadPretrained(baseDir);
      applyLora(model, { rank: 4, alpha: 8, targetModules: ["q_proj", "v_proj", "up_proj"], seed: 1 });
      const serve = externalEngine({
        url: `${engine.url}/v1`,
        weightSync: new VllmLoraSync({ url: engine.url, adapterDir }),
      });
      const steps = 3;
      const { result, metrics } = await train(model, serve, join(root, "ppo-lora-async"), steps, 1);
      expect(result.stepsCompleted).toBe(steps);
      // Each version is loaded under a new name; the one before it is unloaded only one publication later,
      // and never while a call was generating on it (the stand-in would have refused: unload_refused).
      const lifecycle = engine.events.filter((e) => e.type !== "serve").map((e) => `${e.type} ${e.name}`);
      expect(lifecycle).toEqual([
        "load policy-v0",
        "load policy-v1",
        "load policy-v2",
        "unload policy-v0",
        "load policy-v3",
        "unload policy-v1",
        "unload policy-v2",
        "unload policy-v3",
      ]);
      // Every call was served by a loaded adapter, and answered.
      const loaded = new Set<string>();
      let served = 0;
      for (const e of engine.events as EngineEvent[]) {
        if (e.type === "load") loaded.add(e.name);
        if (e.type === "unload") loaded.delete(e.name);
        if (e.type === "serve") {
          served++;
          expect(e.status).toBe(200);
          expect(loaded.has(e.model)).toBe(true);
        }
      }
      // Nothing discarded: every admitted rollout was trained (2 groups x 3 per step).
      expect(served).toBe(steps * 6);
      for (const m of metrics) {
        expect(m["training/n_rollouts"]).toBe(6);
        expect(m["async/staleness/max"]).toBeLessThanOrEqual(1);
        expect(m["training/n_rows_without_rollout_logprobs"]).toBeUndefined();
      }
      model.dispose();
    } finally {
      await engine.close();
    }
  });

  it("the adapter the engine loaded computes what the trainer's model computes", async () => {
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    try {
      const { model } = await loadPretrained(baseDir);
      applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj", "down_proj"], seed: 2 });
      const sync = new VllmLoraSync({ url: engine.url, adapterDir: join(root, "exact") });
      await sync.start({ model, tokenizer, template });
      // Move the adapters (as an update would) and sync: the engine must follow exactly.
      tf.tidy(() => {
        for (const v of model.trainableVariables)
          v.assign(tf.add(v, tf.randomNormal(v.shape, 0, 0.3, "float32", 7)));
      });
      const name = await sync.sync({ model, tokenizer, template }, 1);
      const served = engine.serverFor(name)!.model;
      const mine = probe(model);
      const theirs = probe(served);
      for (let i = 0; i < mine.length; i++) expect(theirs[i]).toBeCloseTo(mine[i]!, 4);
      expect(probe(engine.serverFor("base")!.model)).not.toEqual(mine);
      await sync.close();
      expect(engine.adapters()).toEqual([]);
      model.dispose();
    } finally {
      await engine.close();
    }
  });

  it("full weights: a checkpoint per version and the reload hook; the engine serves the trainer's weights", async () => {
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    try {
      const { model } = await loadPretrained(baseDir);
      const reloaded: number[] = [];
      const sync = new ReloadHookSync({
        checkpointDir: join(root, "full"),
        servedModel: "base",
        reload: async ({ dir, version }) => {
          reloaded.push(version);
          await engine.reloadBase(dir);
          return undefined;
        },
      });
      const { result } = await train(
        model,
        externalEngine({ url: `${engine.url}/v1`, weightSync: sync }),
        join(root, "ppo-full"),
        2,
      );
      expect(result.stepsCompleted).toBe(2);
      expect(reloaded).toEqual([1, 2]);
      expect(await readdir(join(root, "full"))).toEqual(["version-2"]);
      const mine = probe(model);
      const theirs = probe(engine.serverFor("base")!.model);
      for (let i = 0; i < mine.length; i++) expect(theirs[i]).toBeCloseTo(mine[i]!, 4);
      // Rollouts of step 2 were served after the first reload, none before it by the new weights.
      const order = engine.events.map((e) => (e.type === "load" ? "reload" : "serve"));
      expect(order.filter((x) => x === "serve")).toHaveLength(12);
      expect(order.indexOf("reload")).toBe(6);
      expect(order.lastIndexOf("reload")).toBe(order.length - 1);
      model.dispose();
    } finally {
      await engine.close();
    }
  });
});
