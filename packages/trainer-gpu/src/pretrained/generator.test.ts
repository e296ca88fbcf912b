import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { Generator } from "../generate/generator.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { type LoadedPretrained, loadPretrained } from "./load.js";
import { applyLora } from "./lora.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

/** The existing dynamic-batching Generator drives a loaded checkpoint unchanged (KV cache + GQA). */

const tokenizer = new Tokenizer({ chars: "abcdefghijklmnopqrstuvwxyz0123456789 .,!?" });
let root: string;
let loaded: LoadedPretrained;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-gen-"));
  await writeRandomCheckpoint(root, {
    family: "llama",
    seed: 12,
    vocabSize: tokenizer.vocabSize,
    initStd: 0.2,
  });
  loaded = await loadPretrained(root);
});
afterAll(async () => {
  loaded.model.dispose();
  await rm(root, { recursive: true, force: true });
});

/** Greedy continuation recomputing the whole sequence every token (no cache). */
function naiveGreedy(model: LoadedPretrained["model"], prompt: number[], n: number): number[] {
  const ids = [...prompt];
  for (let i = 0; i < n; i++) {
    const next = tf.tidy(() => {
      const l = model.logits([ids]);
      return tf.argMax(tf.slice(l, [0, ids.length - 1, 0], [1, 1, -1]).reshape([-1])).dataSync()[0] as number;
    });
    ids.push(next);
  }
  return ids.slice(prompt.length);
}

describe("Generator on a loaded checkpoint", () => {
  it("concurrent greedy requests of different lengths equal no-cache greedy decoding, with and without LoRA", async () => {
    const model = loaded.model;
    const prompts = [
      tokenizer.encode("hello world"),
      tokenizer.encode("abc"),
      tokenizer.encode("the quick brown fox"),
    ];
    const check = async () => {
      const gen = new Generator(model, tokenizer, { maxBatchSize: 8 });
      const results = await Promise.all(
        prompts.map((p, i) =>
          gen.generate({ promptIds: p, maxTokens: 6, temperature: 0, ignoreEos: true, seed: i }),
        ),
      );
      results.forEach((r, i) => {
        expect(r.tokenIds).toEqual(naiveGreedy(model, prompts[i] as number[], 6));
      });
      return results.map((r) => r.tokenIds);
    };
    const base = await check();
    applyLora(model, { rank: 4, alpha: 64 });
    for (const w of model.lora!.weights.values())
      w.b.assign(tf.randomNormal(w.b.shape, 0, 0.5, "float32", 3));
    const adapted = await check();
    expect(adapted).not.toEqual(base);
  });
});
