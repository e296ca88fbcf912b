import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { loadPretrainedPolicy, type PretrainedPolicy } from "../pretrained/load-policy.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import type { CausalLM } from "./causal-lm.js";
import { PolicyModel } from "./policy-model.js";

/**
 * Public model methods called outside `tf.tidy` leave nothing behind but what they return: the caller
 * disposes the result and `tf.memory().numTensors` is back where it was.
 */

let dir: string;
let hf: PretrainedPolicy;
let lora: PretrainedPolicy;
let policy: PolicyModel;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ seed: 2 });
  hf = await loadPretrainedPolicy(dir);
  lora = await loadPretrainedPolicy(dir, { lora: { rank: 2, seed: 1 } });
  policy = PolicyModel.create({
    vocabSize: 64,
    dModel: 16,
    nLayers: 2,
    nHeads: 2,
    contextLength: 32,
    seed: 1,
  });
});
afterAll(async () => {
  hf?.model.dispose();
  lora?.model.dispose();
  policy?.dispose();
  if (dir) await rm(dirname(dir), { recursive: true, force: true });
});

function leaked(fn: () => tf.TensorContainer): number {
  fn(); // first call: lazily built caches (masks, transposed head) are not leaks
  const before = tf.memory().numTensors;
  tf.dispose(fn());
  return tf.memory().numTensors - before;
}

const kvs = (r: { cache: Array<{ k: tf.Tensor; v: tf.Tensor }> }) => r.cache.flatMap((c) => [c.k, c.v]);

describe.each([
  ["PolicyModel", () => policy as CausalLM],
  ["PretrainedModel", () => hf.model as CausalLM],
  ["PretrainedModel with LoRA", () => lora.model as CausalLM],
])("%s", (_name, model) => {
  const ids = [
    [1, 2, 3, 4, 5],
    [6, 7, 8, 9, 10],
  ];
  const mask = [
    [1, 1, 1, 1, 1],
    [0, 0, 1, 1, 1],
  ];

  it("logits, hidden, tokenLogProbs(+entropy) leave only their result", () => {
    const m = model();
    expect(leaked(() => m.logits(ids))).toBe(0);
    expect(leaked(() => m.logits(ids, mask))).toBe(0);
    expect(leaked(() => m.hidden(ids))).toBe(0);
    expect(leaked(() => m.tokenLogProbs(ids))).toBe(0);
    expect(leaked(() => m.tokenLogProbs(ids, mask, { temperature: 0.7 }))).toBe(0);
    expect(leaked(() => m.tokenLogProbsWithEntropy(ids))).toBe(0);
  });

  it("prefill, prefillMany and decodeStep leave only the cache they return", () => {
    const m = model();
    expect(leaked(() => kvs(m.prefill([1, 2, 3])))).toBe(0);
    expect(
      leaked(() =>
        kvs(
          m.prefillMany([
            [1, 2, 3],
            [4, 5, 6],
          ]),
        ),
      ),
    ).toBe(0);
    const first = m.prefillMany([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const bias = tf.zeros([2, 1, 1, 4]) as tf.Tensor4D;
    expect(leaked(() => kvs(m.decodeStep([7, 8], [3, 3], first.cache, bias)))).toBe(0);
    tf.dispose([bias, ...kvs(first)]);
  });

  it("gradients still flow through them under variableGrads, and nothing is left behind", () => {
    const m = model();
    const before = tf.memory().numTensors;
    const { value, grads } = tf.variableGrads(
      () => tf.neg(tf.mean(m.tokenLogProbs(ids))) as tf.Scalar,
      m.trainableVariables,
    );
    expect(Number.isFinite(value.dataSync()[0])).toBe(true);
    const norms = tf.tidy(() => Object.values(grads).map((g) => tf.norm(g).dataSync()[0] as number));
    expect(norms.some((n) => n > 0)).toBe(true);
    tf.dispose([value, ...Object.values(grads)]);
    expect(tf.memory().numTensors - before).toBe(0);
  });
});
