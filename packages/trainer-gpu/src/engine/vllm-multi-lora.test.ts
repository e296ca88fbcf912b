import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import type { CausalLM } from "../model/causal-lm.js";
import { adapterView } from "../pretrained/adapter-view.js";
import { loadPretrained } from "../pretrained/load.js";
import { addLoraAdapter } from "../pretrained/lora.js";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";
import { MICRO_ARCH } from "../test-support/tiny-pretrained.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { externalEngine } from "./external-engine.js";
import { startFakeVllm } from "./test-support/fake-vllm.js";
import { VllmLoraSync } from "./vllm-lora-sync.js";

/** Every adapter of a multi-adapter model hot-loaded into vLLM under its own name, per policy version. */

const tokenizer = new Tokenizer({ chars: "ab" });
const template = new ChatTemplate(tokenizer);
let root: string;
let baseDir: string;

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-engine-multi-"));
  baseDir = join(root, "base");
  await writeRandomCheckpoint(baseDir, {
    family: "qwen3",
    seed: 4,
    vocabSize: tokenizer.vocabSize,
    ...MICRO_ARCH,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const probe = (model: CausalLM) =>
  tf.tidy(() => Float32Array.from(model.tokenLogProbs([[1, 3, 4, 3, 3, 4, 2]]).dataSync()));
const maxDiff = (a: Float32Array, b: Float32Array) =>
  a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);

describe("VllmLoraSync with one adapter per policy", () => {
  it("loads every adapter under its own name, serves each with the trainer's weights, and swaps them per version", async () => {
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    const { model } = await loadPretrained(baseDir);
    addLoraAdapter(model, "writer", { rank: 2, seed: 1 });
    addLoraAdapter(model, "checker", { rank: 4, seed: 2, targetModules: ["q_proj", "v_proj"] });
    const nudge = (name: string, seed: number) => {
      let i = 0;
      for (const w of model.adapters.get(name)!.weights.values())
        w.b.assign(tf.randomNormal(w.b.shape, 0, 0.3, "float32", seed * 100 + i++));
    };
    nudge("writer", 1);
    nudge("checker", 2);
    const sync = new VllmLoraSync({ url: `${engine.url}/v1`, adapterDir: join(root, "adapters") });
    const serve = externalEngine({ url: `${engine.url}/v1`, weightSync: sync });
    const handle = await serve({ model, tokenizer, template }, { modelName: "policy" });
    try {
      expect(handle.servedModels?.()).toEqual({ writer: "writer-v0", checker: "checker-v0" });
      expect(engine.adapters().sort()).toEqual(["checker-v0", "writer-v0"]);
      // The engine computes exactly what the trainer's view of each adapter computes.
      for (const name of ["writer", "checker"]) {
        const served = engine.serverFor(`${name}-v0`)!.model;
        expect(maxDiff(probe(served), probe(adapterView(model, name)))).toBeLessThan(1e-5);
      }
      const models = (await (await fetch(`${engine.url}/v1/models`)).json()) as any;
      expect(models.data.map((m: any) => [m.id, m.parent]).sort()).toEqual([
        ["base", null],
        ["checker-v0", "base"],
        ["writer-v0", "base"],
      ]);
      const v0Dirs = ["writer-v0", "checker-v0"].map((n) => join(root, "adapters", n));
      // An update that changes only the writer: both are re-published, the old version is unloaded.
      await handle.swapWeights(() => nudge("writer", 7));
      expect(handle.servedModels?.()).toEqual({ writer: "writer-v1", checker: "checker-v1" });
      expect(engine.adapters().sort()).toEqual(["checker-v1", "writer-v1"]);
      expect(engine.events.filter((e) => e.type !== "serve").map((e) => `${e.type}:${e.name}`)).toEqual([
        "load:writer-v0",
        "load:checker-v0",
        "load:writer-v1",
        "load:checker-v1",
        "unload:writer-v0",
        "unload:checker-v0",
      ]);
      expect(v0Dirs.some((d) => existsSync(d))).toBe(false);
      for (const name of ["writer", "checker"]) {
        const served = engine.serverFor(`${name}-v1`)!.model;
        expect(maxDiff(probe(served), probe(adapterView(model, name)))).toBeLessThan(1e-5);
      }
      const stale = await fetch(`${engine.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "writer-v0", prompt: "ab", max_tokens: 2 }),
      });
      expect(stale.status).toBe(404);
    } finally {
      await handle.close();
      await engine.close();
      model.dispose();
    }
    expect(engine.adapters()).toEqual([]);
  });
});
