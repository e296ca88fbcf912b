import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { targetLogProbs } from "../model/batch-inputs.js";
import { loadPretrained } from "./load.js";
import { applyLora } from "./lora.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";
import { ReferenceLM } from "./test-support/reference-lm.js";

/**
 * The log-prob path (chunked head on the device, no `[B,T,V]` logits) against the full-logits path of the
 * same model and against the independent float64 reference.
 */

let root: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-lp-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const ROWS = [
  [1, 17, 200, 5, 99, 3, 250, 42, 7, 128, 64, 2],
  [0, 0, 0, 9, 8, 77, 300, 11, 4, 6, 199, 31],
];
const MASK = [ROWS[0]?.map(() => 1) ?? [], [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1]];

function maxAbsDiff(a: number[][], b: number[][]): number {
  let m = 0;
  a.forEach((r, i) => {
    r.forEach((x, j) => {
      m = Math.max(m, Math.abs(x - (b[i]?.[j] as number)));
    });
  });
  return m;
}

/** The old path: full logits, log-softmax, pick. */
function viaLogits(model: PretrainedModel, temperature: number) {
  return tf.tidy(() => {
    const r = targetLogProbs(model.logits(ROWS, MASK), ROWS, temperature, true);
    return { lp: r.logProbs.arraySync(), ent: (r.entropy as tf.Tensor2D).arraySync() };
  });
}

async function load(family: "qwen3" | "llama", seed: number) {
  const dir = join(root, `${family}-${seed}`);
  await writeRandomCheckpoint(dir, { family, seed, initStd: 0.15, vocabSize: 320 });
  return { dir, model: (await loadPretrained(dir)).model };
}

describe("log-probs computed on the device", () => {
  for (const family of ["qwen3", "llama"] as const) {
    it(`${family} (${family === "qwen3" ? "tied" : "untied"} head): equals the full-logits path within 1e-5, chunked or not`, async () => {
      const { dir, model } = await load(family, 5);
      try {
        for (const temperature of [1, 0.6]) {
          const old = viaLogits(model, temperature);
          for (const chunk of [1 << 22, 256]) {
            model.headChunkElements = chunk;
            const r = tf.tidy(() => {
              const s = model.tokenLogProbsWithEntropy(ROWS, MASK, { temperature });
              return { lp: s.logProbs.arraySync(), ent: s.entropy.arraySync() };
            });
            expect(maxAbsDiff(r.lp, old.lp)).toBeLessThan(1e-5);
            expect(maxAbsDiff(r.ent, old.ent)).toBeLessThan(1e-5);
          }
        }
        // And against the float64 reference (one unpadded sequence).
        const ids = ROWS[0] as number[];
        const ref = (await ReferenceLM.load(dir)).forward(ids);
        const refLp = ids.slice(1).map((y, t) => {
          const z = ref[t] as Float64Array;
          const m = Math.max(...z);
          const lse = m + Math.log(z.reduce((s, x) => s + Math.exp(x - m), 0));
          return (z[y] as number) - lse;
        });
        model.headChunkElements = 128;
        const ours = tf.tidy(() => model.tokenLogProbs([ids]).arraySync()[0] as number[]);
        expect(maxAbsDiff([ours], [refLp])).toBeLessThan(1e-4);
        expect(Math.min(...refLp)).toBeLessThan(-3);
      } finally {
        model.dispose();
      }
    });
  }

  it("gradients through the chunked head equal the full-logits gradients (full fine-tuning and LoRA)", async () => {
    const { model } = await load("qwen3", 6);
    try {
      const compare = () => {
        const vars = model.trainableVariables;
        const weights = tf.tensor2d(
          ROWS.map((r, b) => r.slice(1).map((_, t) => (((b + 1) * (t + 3)) % 5) - 2)),
        );
        const viaFull = tf.variableGrads(
          () => tf.sum(tf.mul(targetLogProbs(model.logits(ROWS, MASK), ROWS, 0.8, false).logProbs, weights)),
          vars,
        );
        model.headChunkElements = 256;
        const viaHead = tf.variableGrads(
          () => tf.sum(tf.mul(model.tokenLogProbs(ROWS, MASK, { temperature: 0.8 }), weights)),
          vars,
        );
        let worst = 0;
        let scale = 0;
        for (const v of vars) {
          const a = viaFull.grads[v.name]?.dataSync() ?? [];
          const b = viaHead.grads[v.name]?.dataSync() ?? [];
          for (let i = 0; i < a.length; i++) {
            worst = Math.max(worst, Math.abs((a[i] as number) - (b[i] as number)));
            scale = Math.max(scale, Math.abs(a[i] as number));
          }
        }
        tf.dispose([
          weights,
          viaFull.value,
          viaHead.value,
          ...Object.values(viaFull.grads),
          ...Object.values(viaHead.grads),
        ]);
        expect(scale).toBeGreaterThan(1e-3);
        expect(worst / scale).toBeLessThan(1e-5);
      };
      compare();
      applyLora(model, { rank: 4, alpha: 8 });
      // Non-zero B so the adapters change the output.
      for (const v of model.trainableVariables)
        if (/lora_B/.test(v.name)) v.assign(tf.randomNormal(v.shape, 0, 0.2, "float32", 3));
      compare();
    } finally {
      model.dispose();
    }
  });

  it("tokenScores gives raw (temperature 1) log-probs beside the scaled ones; the base view drops the adapters", async () => {
    const { model } = await load("llama", 7);
    try {
      const base = tf.tidy(() => model.tokenLogProbs(ROWS).arraySync());
      applyLora(model, { rank: 4, alpha: 8 });
      for (const v of model.trainableVariables)
        if (/lora_B/.test(v.name)) v.assign(tf.randomNormal(v.shape, 0, 0.2, "float32", 4));
      const s = tf.tidy(() => {
        const r = model.tokenScores(ROWS, { temperature: 0.5, raw: true });
        return { lp: r.logProbs.arraySync(), raw: r.raw?.arraySync() ?? [], ent: r.entropy.arraySync() };
      });
      const plain = tf.tidy(() => model.tokenLogProbs(ROWS).arraySync());
      const scaled = tf.tidy(() => model.tokenLogProbs(ROWS, undefined, { temperature: 0.5 }).arraySync());
      expect(maxAbsDiff(s.raw, plain)).toBeLessThan(1e-6);
      expect(maxAbsDiff(s.lp, scaled)).toBeLessThan(1e-6);
      expect(maxAbsDiff(plain, base)).toBeGreaterThan(1e-3);
      const view = model.frozenReference() as unknown as PretrainedModel;
      const fromView = tf.tidy(() => view.tokenScores(ROWS).logProbs.arraySync());
      expect(maxAbsDiff(fromView, base)).toBeLessThan(1e-6);
    } finally {
      model.dispose();
    }
  });
});
