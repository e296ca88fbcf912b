import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import { InvalidArgumentError } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import type { CausalLM } from "../model/causal-lm.js";
import { PolicyModel } from "../model/policy-model.js";
import { loadPretrainedPolicy, type PretrainedPolicy } from "../pretrained/load-policy.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { trainStep } from "./train-step.js";

/** `trainStep` on raw ids against a float64 reference: the loss from the logits, the gradient by finite differences. */

const ids = [
  [3, 7, 1, 9, 4, 2],
  [5, 5, 8, 0],
];
const mask = [
  [0, 0, 1, 1, 1, 1],
  [0, 1, 1, 1],
];

/** Mean NLL over the masked targets, computed in float64 JS from the model's logits. */
function referenceLoss(model: CausalLM, rows: number[][], m: number[][]): number {
  let sum = 0;
  let n = 0;
  rows.forEach((row, b) => {
    const logits = tf.tidy(() => model.logits([row]).arraySync()[0] as number[][]);
    for (let t = 1; t < row.length; t++) {
      if (!m[b]?.[t]) continue;
      const z = logits[t - 1] as number[];
      const max = Math.max(...z);
      const lse = max + Math.log(z.reduce((a, v) => a + Math.exp(v - max), 0));
      sum += lse - (z[row[t] as number] as number);
      n++;
    }
  });
  return sum / n;
}

beforeAll(async () => {
  await selectBackend({ log: () => {} });
});

/** A model small enough for finite differences (12 tokens, d=8, one layer). */
const tinyModel = (seed: number) =>
  PolicyModel.create({ vocabSize: 12, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 8, seed });

describe("trainStep", () => {
  it("returns the reference loss and moves the weights by -lr x the finite-difference gradient (SGD)", () => {
    const model = tinyModel(4);
    // Embedding entries of tokens that are inputs (3, 7, 5), so their gradients are not zero.
    const v = model.variable("tok_emb");
    const coords = [3 * 8 + 0, 7 * 8 + 3, 5 * 8 + 6];
    const eps = 1e-2;
    const fd = coords.map((i) => {
      const base = v.dataSync().slice();
      const at = (delta: number) => {
        const w = base.slice();
        w[i] = (w[i] as number) + delta;
        v.assign(tf.tensor(w, v.shape));
        return referenceLoss(model, ids, mask);
      };
      const g = (at(eps) - at(-eps)) / (2 * eps);
      v.assign(tf.tensor(base, v.shape));
      return g;
    });
    const before = v.dataSync().slice();
    const expectedLoss = referenceLoss(model, ids, mask);
    const lr = 0.1;
    const r = trainStep(model, { inputIds: ids, mask, optimizer: tf.train.sgd(lr) });
    expect(Math.abs(r.loss - expectedLoss)).toBeLessThan(1e-5);
    expect(r.tokens).toBe(7);
    const after = v.dataSync();
    coords.forEach((i, k) => {
      const g = -((after[i] as number) - (before[i] as number)) / lr;
      expect(Math.abs(g - (fd[k] as number))).toBeLessThan(2e-3 + 0.05 * Math.abs(fd[k] as number));
    });
    expect(fd.some((g) => Math.abs(g) > 1e-3)).toBe(true);
    model.dispose();
  });

  it("transformers-style labels (-100 = no loss) train exactly like the mask; clipping bounds the step", () => {
    const a = tinyModel(5);
    const b = a.clone();
    const labels = ids.map((row, i) => row.map((id, t) => (mask[i]?.[t] ? id : -100)));
    const ra = trainStep(a, { inputIds: ids, mask, optimizer: tf.train.sgd(0.1) });
    const rb = trainStep(b, { inputIds: ids, labels, optimizer: tf.train.sgd(0.1) });
    expect(rb.loss).toBe(ra.loss);
    a.trainableVariables.forEach((v, k) => {
      expect([...v.dataSync()]).toEqual([...(b.trainableVariables[k] as tf.Variable).dataSync()]);
    });
    const c = a.clone();
    const w0 = c.trainableVariables.map((v) => v.dataSync().slice());
    const clipped = trainStep(c, { inputIds: ids, mask, optimizer: tf.train.sgd(1), maxGradNorm: 1e-3 });
    expect(clipped.gradNorm).toBeGreaterThan(1e-3);
    let sq = 0;
    c.trainableVariables.forEach((v, k) => {
      const d = v.dataSync();
      for (let i = 0; i < d.length; i++) sq += ((d[i] as number) - (w0[k]?.[i] as number)) ** 2;
    });
    expect(Math.sqrt(sq)).toBeCloseTo(1e-3, 5);
    for (const m of [a, b, c]) m.dispose();
  });

  it("rejects bad input with InvalidArgumentError naming the field", () => {
    const model = tinyModel(6);
    const opt = tf.train.sgd(0.1);
    const field = (o: Parameters<typeof trainStep>[1]) => {
      try {
        trainStep(model, o);
      } catch (e) {
        return InvalidArgumentError.isInstance(e) ? e.field : String(e);
      }
      return null;
    };
    expect(field({ inputIds: [[1, 99]], optimizer: opt })).toBe("inputIds[0][1]");
    expect(
      field({
        inputIds: ids,
        labels: [
          [3, 7, 1, 9, 4, 3],
          [5, 5, 8, 0],
        ],
        optimizer: opt,
      }),
    ).toBe("labels[0][5]");
    expect(field({ inputIds: ids, mask: [[0, 1]], optimizer: opt })).toBe("mask[0]");
    expect(field({ inputIds: [[1, 2]], mask: [[0, 0]], optimizer: opt })).toBe("mask");
    expect(field({ inputIds: [[1, 2, 3, 4, 5, 6, 7, 8, 9]], optimizer: opt })).toBe("inputIds");
    model.dispose();
  });
});

describe("namedParameters of a checkpoint model", () => {
  let dir: string;
  let full: PretrainedPolicy;
  let lora: PretrainedPolicy;
  beforeAll(async () => {
    dir = await writeTinyPretrainedCheckpoint({ seed: 3 });
    full = await loadPretrainedPolicy(dir);
    lora = await loadPretrainedPolicy(dir, { lora: { rank: 2, seed: 1 } });
  });
  afterAll(async () => {
    full?.model.dispose();
    lora?.model.dispose();
    if (dir) await rm(dirname(dir), { recursive: true, force: true });
  });

  it("names every parameter as Hugging Face / PEFT do, without the tfjs scope", () => {
    const names = full.model.namedParameters().map(([n]) => n);
    expect(names).toEqual(full.model.weightNames);
    expect(names).toContain("model.layers.0.self_attn.q_proj.weight");
    expect(names.some((n) => n.startsWith("agl_hf_"))).toBe(false);
    expect(full.model.trainableVariables[0]?.name).toMatch(/^agl_hf_\d+\//);
    const trainable = lora.model.namedParameters({ trainable: true });
    expect(trainable.map(([, v]) => v)).toEqual(lora.model.trainableVariables);
    expect(trainable[0]?.[0]).toBe("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
    const all = lora.model.namedParameters().map(([n]) => n);
    expect(all).toEqual([...lora.model.weightNames, ...trainable.map(([n]) => n)]);
  });

  it("a trainStep on a LoRA model moves only the adapters and lowers the loss", () => {
    const rows = [[10, 20, 30, 40, 50, 60, 70, 80]];
    const base = lora.model.weightNames.map((n) => lora.model.variable(n).dataSync().slice());
    const opt = tf.train.adam(0.05);
    const first = trainStep(lora.model, { inputIds: rows, optimizer: opt });
    let last = first;
    for (let i = 0; i < 5; i++) last = trainStep(lora.model, { inputIds: rows, optimizer: opt });
    expect(last.loss).toBeLessThan(first.loss);
    lora.model.weightNames.forEach((n, k) => {
      expect(lora.model.variable(n).dataSync()).toEqual(base[k]);
    });
  });
});
