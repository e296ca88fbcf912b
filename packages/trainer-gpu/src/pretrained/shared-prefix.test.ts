import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { maskedNll } from "../sft/sft.js";
import { parseHfConfig } from "./hf-config.js";
import { applyLora } from "./lora.js";
import { PretrainedModel } from "./pretrained-model.js";
import { randomCheckpointConfig } from "./random-checkpoint.js";
import { commonPrefixLength } from "./shared-prefix.js";

/**
 * Shared-prefix scoring (prefix computed once, suffixes against its repeated keys/values) against the
 * plain forward of the same model: per-token log-probs, entropies and the gradient of every parameter —
 * base weights and LoRA adapters — on three families, with right padding and prefixes of every edge length.
 */

beforeAll(async () => {
  await selectBackend({ log: () => {} });
});

function model(family: "qwen3" | "qwen2" | "llama", seed: number): PretrainedModel {
  const { arch } = parseHfConfig(randomCheckpointConfig({ family, seed, vocabSize: 97 }));
  return PretrainedModel.random(arch, seed, { std: 0.2 });
}

/** Rows of `T` ids sharing their first `P`; some right-padded with 0 after a shorter real part. */
function rowsWithPrefix(B: number, T: number, P: number, seed: number): number[][] {
  let s = seed;
  const next = () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return 3 + (s % 90);
  };
  const prefix = Array.from({ length: P }, next);
  return Array.from({ length: B }, (_, b) => {
    const row = [...prefix];
    // The token after the prefix differs between rows 0 and 1, so the common prefix is exactly P.
    row.push(b === 0 ? 95 : b === 1 ? 96 : next());
    while (row.length < T) row.push(next());
    const real = b === B - 1 && T - P > 3 ? T - 2 : T;
    return row.slice(0, T).map((id, t) => (t < real ? id : 0));
  });
}

const maxDiff = (a: Float32Array | number[], b: Float32Array | number[]) =>
  Array.from(a).reduce((m, x, i) => Math.max(m, Math.abs(x - (b[i] as number))), 0);

/** Log-probs, entropies, loss and every trainable gradient, with sharing on or off. */
function run(m: PretrainedModel, rows: number[][], mask: number[][], share: boolean) {
  m.sharePrefix = share;
  m.sharedPrefixMinTokens = 1;
  const scores = tf.tidy(() => {
    const r = m.tokenLogProbsWithEntropy(rows);
    return { lp: Array.from(r.logProbs.dataSync()), ent: Array.from(r.entropy.dataSync()) };
  });
  const raw = tf.tidy(() => {
    const r = m.tokenScores(rows, { temperature: 0.7, raw: true });
    return Array.from((r.raw as tf.Tensor).dataSync());
  });
  const vars = m.trainableVariables;
  const { value, grads } = tf.variableGrads(() => maskedNll(m, rows, mask), vars);
  const out = {
    ...scores,
    raw,
    loss: value.dataSync()[0] as number,
    grads: vars.map((v) => ({ name: v.name, g: Float32Array.from((grads[v.name] as tf.Tensor).dataSync()) })),
  };
  tf.dispose([value, ...Object.values(grads)]);
  return out;
}

function expectSame(m: PretrainedModel, rows: number[][]) {
  const mask = rows.map((r) => r.map((id, t) => (t > 0 && id !== 0 ? 1 : 0)));
  const plain = run(m, rows, mask, false);
  const shared = run(m, rows, mask, true);
  expect(maxDiff(shared.lp, plain.lp)).toBeLessThan(2e-5);
  expect(maxDiff(shared.ent, plain.ent)).toBeLessThan(2e-5);
  expect(maxDiff(shared.raw, plain.raw)).toBeLessThan(2e-5);
  expect(Math.abs(shared.loss - plain.loss)).toBeLessThan(1e-5);
  expect(shared.grads.length).toBe(plain.grads.length);
  shared.grads.forEach(({ name, g }, i) => {
    const ref = (plain.grads[i] as { g: Float32Array }).g;
    const scale = Math.max(1e-3, ...Array.from(ref, Math.abs));
    // Relative to the gradient's own scale: float32 sums over a different grouping of the same terms.
    expect(maxDiff(g, ref) / scale, name).toBeLessThan(1e-4);
  });
  // A gradient that vanished would pass the check above trivially; the loss must reach every weight.
  expect(plain.grads.every(({ g }) => g.some((x) => x !== 0))).toBe(true);
}

describe("shared-prefix scoring equals the plain forward", () => {
  for (const family of ["qwen3", "qwen2", "llama"] as const) {
    it(`${family}: log-probs, entropies and every base-weight gradient, prefix 9 of 16, right padding`, () => {
      const m = model(family, 3);
      try {
        const rows = rowsWithPrefix(4, 16, 9, 11);
        expect(commonPrefixLength(rows)).toBe(9);
        expectSame(m, rows);
      } finally {
        m.dispose();
      }
    });

    it(`${family}: LoRA adapters' gradients, and prefixes of length 1 and all-but-one`, () => {
      const m = applyLora(model(family, 5), { rank: 4, seed: 2 });
      try {
        // Non-zero B so the adapters change the function and A's gradient is non-zero.
        for (const [, w] of m.lora?.weights ?? [])
          w.b.assign(tf.randomNormal(w.b.shape, 0, 0.2, "float32", 4));
        expectSame(m, rowsWithPrefix(3, 12, 7, 21));
        expectSame(m, rowsWithPrefix(3, 12, 1, 22));
        expectSame(m, rowsWithPrefix(3, 12, 11, 23));
      } finally {
        m.dispose();
      }
    });
  }

  it("detects the longest common prefix; identical rows keep a one-token suffix; no prefix shares nothing", () => {
    expect(
      commonPrefixLength([
        [1, 2, 3, 4],
        [1, 2, 5, 4],
        [1, 2, 3, 9],
      ]),
    ).toBe(2);
    expect(
      commonPrefixLength([
        [1, 2, 3],
        [1, 2, 3],
      ]),
    ).toBe(2);
    expect(
      commonPrefixLength([
        [7, 2],
        [1, 2],
      ]),
    ).toBe(0);
    expect(commonPrefixLength([[1, 2, 3, 4]])).toBe(3);
    const m = model("qwen3", 1);
    try {
      // Prefix 0: the plain path (there is nothing to share) gives the same numbers either way.
      expectSame(m, [
        [5, 6, 7, 8],
        [9, 6, 7, 8],
      ]);
      // Identical rows: everything but the last token is shared.
      expectSame(m, [
        [5, 6, 7, 8, 9],
        [5, 6, 7, 8, 9],
      ]);
    } finally {
      m.dispose();
    }
  });

  it("does a fraction of the matmul work (the prefix runs once) and leaks no tensor", async () => {
    const m = model("qwen2", 2);
    const rows = rowsWithPrefix(8, 40, 32, 5);
    const matmulFlops = async (share: boolean) => {
      m.sharePrefix = share;
      m.sharedPrefixMinTokens = 1;
      tf.tidy(() => m.tokenLogProbs(rows)); // warm the mask and rotary caches
      const before = tf.memory().numTensors;
      const info = await tf.profile(() => tf.tidy(() => m.tokenLogProbs(rows)));
      tf.dispose(info.result as tf.Tensor);
      expect(tf.memory().numTensors - before).toBe(0);
      let flops = 0;
      for (const k of info.kernels) {
        if (k.name !== "BatchMatMul") continue;
        const out = k.outputShapes[0] as number[];
        const a = k.inputShapes[0] as number[];
        const inner = a[a.length - 1] as number;
        flops += 2 * inner * out.reduce((x, y) => x * y, 1);
      }
      return flops;
    };
    try {
      const plain = await matmulFlops(false);
      const shared = await matmulFlops(true);
      // 8 rows of 40 tokens vs 32 shared + 8 x 8 own: under 40% of the plain forward's work.
      expect(shared).toBeGreaterThan(0);
      expect(shared / plain).toBeLessThan(0.4);
    } finally {
      m.dispose();
    }
  });
});
