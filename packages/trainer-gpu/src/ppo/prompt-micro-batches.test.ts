import * as tf from "@tensorflow/tfjs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { parseHfConfig } from "../pretrained/hf-config.js";
import { applyLora } from "../pretrained/lora.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { randomCheckpointConfig } from "../pretrained/random-checkpoint.js";
import { computeLogprobs, type RowTensors, updateActor } from "./actor.js";
import type { LossAggMode } from "./config.js";
import { AdamW } from "./optim.js";
import { promptMicroBatches } from "./prompt-micro-batches.js";
import { actorOptions } from "./test-support/actor-options.js";
import type { TrainRow } from "./triplet-rows.js";

beforeAll(async () => {
  await selectBackend({ log: () => {} });
});

describe("promptMicroBatches", () => {
  it("partitions the rows into ceil(n / maxRows) micro-batches of at most maxRows, a prompt's rows together", () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ prompt: fc.integer({ min: 0, max: 3 }), len: fc.integer({ min: 1, max: 9 }) }), {
          minLength: 1,
          maxLength: 30,
        }),
        fc.integer({ min: 1, max: 8 }),
        (spec, maxRows) => {
          const rows = spec.map((s) => ({ promptIds: [s.prompt, 7], responseIds: new Array(s.len).fill(1) }));
          const parts = promptMicroBatches(rows, maxRows);
          const all = parts.flat().sort((a, b) => a - b);
          expect(all).toEqual(rows.map((_, i) => i));
          if (new Set(spec.map((s) => s.prompt)).size === rows.length) return;
          expect(parts.length).toBe(Math.ceil(rows.length / maxRows));
          for (const p of parts) expect(p.length).toBeLessThanOrEqual(maxRows);
          // Each prompt's rows span as few micro-batches as its size allows (contiguous runs).
          const byPrompt = new Map<number, number[]>();
          parts.forEach((p, k) => {
            for (const i of p) byPrompt.set(spec[i]!.prompt, [...(byPrompt.get(spec[i]!.prompt) ?? []), k]);
          });
          for (const ks of byPrompt.values()) {
            const span = Math.max(...ks) - Math.min(...ks) + 1;
            expect(span).toBeLessThanOrEqual(Math.ceil(ks.length / maxRows) + 1);
          }
        },
      ),
    );
  });

  it("GRPO groups of 8 in micro-batches of 8: one prompt per micro-batch", () => {
    const rows = Array.from({ length: 24 }, (_, i) => ({
      promptIds: [i % 3, 5, 5],
      responseIds: new Array(1 + ((i * 7) % 5)).fill(2),
    }));
    for (const part of promptMicroBatches(rows, 8)) {
      expect(new Set(part.map((i) => i % 3)).size).toBe(1);
    }
  });
});

describe("PPO on a prefix-sharing model: same update as one unshared micro-batch", () => {
  const { arch } = parseHfConfig(randomCheckpointConfig({ family: "qwen3", seed: 4, vocabSize: 61 }));
  const preamble = Array.from({ length: 18 }, (_, i) => 3 + ((i * 13) % 50));
  const rows: TrainRow[] = [];
  for (let g = 0; g < 2; g++) {
    for (let r = 0; r < 4; r++) {
      const response = Array.from(
        { length: 3 + ((r * 5 + g) % 6) },
        (_, t) => 3 + ((t * 11 + r * 7 + g) % 55),
      );
      rows.push({
        rolloutId: `g${g}r${r}`,
        uid: `g${g}`,
        score: r % 2,
        promptIds: [...preamble, 40 + g, 41 + g],
        responseIds: response,
        responseMask: response.map((_, t) => (t === 1 ? 0 : 1)),
        rolloutLogprobs: null,
        isDrop: false,
        responseTruncated: false,
      });
    }
  }

  /** One PPO step (old and reference log-probs, KL loss, one mini-batch of 8): new adapter values, metrics. */
  function ppoStep(share: boolean, microBatchRows: number, aggMode: LossAggMode) {
    const m = applyLora(PretrainedModel.random(arch, 4, { std: 0.2 }), { rank: 2, seed: 1 });
    m.sharePrefix = share;
    m.sharedPrefixMinTokens = 4;
    for (const [, w] of m.lora?.weights ?? []) w.b.assign(tf.randomNormal(w.b.shape, 0, 0.2, "float32", 9));
    try {
      const old = computeLogprobs(m, rows, microBatchRows, 0, 0.8);
      const ref = computeLogprobs(m.frozenReference(), rows, microBatchRows, 0, 0.8);
      const inputs: RowTensors[] = rows.map((row, i) => ({
        advantages: row.responseIds.map(() => (row.score - 0.5) * (1 + i / 10)),
        oldLogprobs: old.logprobs[i]!.map((x) => x + 0.01),
        refLogprobs: ref.logprobs[i]!,
        tisWeights: null,
      }));
      // eps 1 makes the first Adam step proportional to the gradient (with a small eps it is lr * sign(g),
      // which float noise in a near-zero gradient component flips), so the weights compare the gradients.
      const optimizer = new AdamW(m.trainableVariables, { betas: [0.9, 0.999], eps: 1, weightDecay: 0 });
      const metrics = updateActor(m, optimizer, rows, inputs, {
        ...actorOptions({ aggMode, microBatchRows, miniBatchRows: 8, temperature: 0.8 }),
        useKlLoss: true,
        klLossCoef: 0.1,
        entropyCoeff: 0.01,
        lr: () => 0.1,
      });
      const weights = m.trainableVariables.map((v) => Float32Array.from(v.dataSync()));
      return { old: old.logprobs.flat(), ref: ref.logprobs.flat(), metrics, weights };
    } finally {
      m.dispose();
    }
  }

  for (const aggMode of [
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
    "per_rollout_mean",
  ] as const) {
    it(`${aggMode}: micro-batches of 4 sharing the prompt equal one plain micro-batch of 8`, () => {
      const plain = ppoStep(false, 8, aggMode);
      const shared = ppoStep(true, 4, aggMode);
      const diff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
        Array.from(a).reduce((mx, x, i) => Math.max(mx, Math.abs(x - (b[i] as number))), 0);
      expect(diff(shared.old, plain.old)).toBeLessThan(2e-5);
      expect(diff(shared.ref, plain.ref)).toBeLessThan(2e-5);
      for (const k of [
        "actor/pg_loss",
        "actor/ppo_kl",
        "actor/entropy",
        "actor/kl_loss",
        "actor/grad_norm",
      ] as const)
        expect(Math.abs(shared.metrics[k] - plain.metrics[k]), k).toBeLessThan(1e-5);
      expect(shared.metrics["actor/grad_norm"]).toBeGreaterThan(0);
      shared.weights.forEach((w, i) => {
        expect(diff(w, plain.weights[i]!)).toBeLessThan(2e-6);
      });
    });
  }
});
