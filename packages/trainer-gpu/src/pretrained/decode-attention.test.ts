import * as tf from "@tensorflow/tfjs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { DECODE_ATTENTION_KERNEL, decodeAttention, hasDecodeAttention } from "./decode-attention.js";
import { generationKernels } from "./decoder.js";
import { parseHfConfig } from "./hf-config.js";
import { groupedAttention } from "./layers.js";
import { PretrainedModel } from "./pretrained-model.js";
import { randomCheckpointConfig } from "./random-checkpoint.js";

/**
 * The fused decode-attention kernel (WebAssembly SIMD on the wasm backend) against an independent float64
 * reference and against the op-by-op path it replaces: grouped heads, per-row padding masks, a bias shared
 * by all rows, and whole decode steps of a model with the kernel on and off.
 */

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
});

interface Case {
  B: number;
  Hkv: number;
  g: number;
  L: number;
  dh: number;
  /** Masked leading columns per row (left padding of a right-aligned batch cache). */
  pads: number[];
  shared: boolean;
  seed: number;
}

/** softmax(scale q.k + bias) . v in float64, one row and head at a time. */
function reference(q: Float32Array, k: Float32Array, v: Float32Array, bias: Float32Array, c: Case) {
  const H = c.Hkv * c.g;
  const out = new Float64Array(c.B * H * c.dh);
  for (let b = 0; b < c.B; b++)
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / c.g);
      const s: number[] = [];
      for (let t = 0; t < c.L; t++) {
        let dot = 0;
        for (let i = 0; i < c.dh; i++)
          dot +=
            (q[(b * H + h) * c.dh + i] as number) * (k[((b * c.Hkv + kvh) * c.L + t) * c.dh + i] as number);
        s.push(dot / Math.sqrt(c.dh) + (bias[(c.shared ? 0 : b) * c.L + t] as number));
      }
      const max = Math.max(...s);
      const e = s.map((x) => Math.exp(x - max));
      const z = e.reduce((x, y) => x + y, 0);
      for (let t = 0; t < c.L; t++)
        for (let i = 0; i < c.dh; i++)
          out[(b * H + h) * c.dh + i] =
            (out[(b * H + h) * c.dh + i] as number) +
            ((e[t] as number) / z) * (v[((b * c.Hkv + kvh) * c.L + t) * c.dh + i] as number);
    }
  return out;
}

function inputs(c: Case) {
  let state = c.seed * 7919 + 1;
  const rand = () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return (state / 2147483648) * 4 - 2;
  };
  const H = c.Hkv * c.g;
  const q = Float32Array.from({ length: c.B * H * c.dh }, rand);
  const k = Float32Array.from({ length: c.B * c.Hkv * c.L * c.dh }, rand);
  const v = Float32Array.from({ length: c.B * c.Hkv * c.L * c.dh }, rand);
  const rows = c.shared ? 1 : c.B;
  const bias = new Float32Array(rows * c.L);
  for (let b = 0; b < rows; b++) bias.fill(-1e9, b * c.L, b * c.L + (c.pads[b] ?? 0));
  return { q, k, v, bias, H, rows };
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)));
  return m;
};

const caseArb = fc
  .record({
    B: fc.integer({ min: 1, max: 5 }),
    Hkv: fc.integer({ min: 1, max: 3 }),
    g: fc.integer({ min: 1, max: 3 }),
    L: fc.integer({ min: 1, max: 40 }),
    dh: fc.constantFrom(4, 8, 16, 64, 128),
    shared: fc.boolean(),
    seed: fc.integer({ min: 0, max: 1000 }),
  })
  .chain((c) =>
    fc.record({
      ...Object.fromEntries(Object.entries(c).map(([key, x]) => [key, fc.constant(x)])),
      pads: fc.array(fc.integer({ min: 0, max: c.L - 1 }), { minLength: c.B, maxLength: c.B }),
    }),
  ) as fc.Arbitrary<Case>;

describe("fused decode attention (wasm)", () => {
  it("runs on the wasm backend for head sizes that are multiples of 4", () => {
    expect(tf.getBackend()).toBe("wasm");
    expect(hasDecodeAttention(64)).toBe(true);
    expect(hasDecodeAttention(6)).toBe(false);
  });

  it("equals a float64 reference and the op-by-op path (grouped heads, padding, shared bias)", () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { q, k, v, bias, H, rows } = inputs(c);
        const qt = tf.tensor4d(q, [c.B, H, 1, c.dh]);
        const kt = tf.tensor4d(k, [c.B, c.Hkv, c.L, c.dh]);
        const vt = tf.tensor4d(v, [c.B, c.Hkv, c.L, c.dh]);
        const bt = tf.tensor4d(bias, [rows, 1, 1, c.L]);
        const before = tf.memory().numTensors;
        const fused = decodeAttention(qt, kt, vt, bt, 1 / Math.sqrt(c.dh));
        expect(tf.memory().numTensors).toBe(before + 1);
        const ops = tf.tidy(() => groupedAttention(qt, kt, vt, bt, 1 / Math.sqrt(c.dh)));
        const got = fused.dataSync();
        const ref = reference(q, k, v, bias, c);
        // Outputs are convex combinations of values in [-2, 2]: float32 rounding stays far below 1e-5.
        expect(maxDiff(got, ref)).toBeLessThan(1e-5);
        expect(maxDiff(got, ops.dataSync())).toBeLessThan(1e-5);
        tf.dispose([qt, kt, vt, bt, fused, ops]);
      }),
      { numRuns: 60, seed: 28 },
    );
  });

  it("a batched decode step of a model gives the same logits and cache with and without it", async () => {
    const { arch } = parseHfConfig(
      randomCheckpointConfig({ family: "qwen2", seed: 3, numHeads: 4, numKvHeads: 2, vocabSize: 300 }),
    );
    const model = PretrainedModel.random(arch, 3, { std: 0.1 });
    const prompts = [
      [5, 9, 12, 40, 7],
      [8, 8, 100, 3, 2],
      [250, 1, 77, 30, 6],
    ];
    const step = async (fused: boolean) => {
      generationKernels.enabled = fused;
      try {
        const { cache } = model.prefillMany(prompts);
        // Row 1 has two padded columns, as a shorter prompt in the right-aligned batch cache would.
        const bias = tf.tensor4d([0, 0, 0, 0, 0, 0, -1e9, -1e9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [3, 1, 1, 6]);
        let r!: ReturnType<typeof model.decodeStep>;
        const { kernelNames: kernels } = await tf.profile(() => {
          r = model.decodeStep([4, 50, 99], [5, 5, 5], cache, bias);
          return [];
        });
        const kv = r.cache.map((c) => [c.k.dataSync().slice(), c.v.dataSync().slice()]);
        tf.dispose([bias, ...cache.flatMap((c) => [c.k, c.v]), ...r.cache.flatMap((c) => [c.k, c.v])]);
        return { logits: r.logits, kv, kernels };
      } finally {
        generationKernels.enabled = true;
      }
    };
    const a = await step(true);
    const b = await step(false);
    // The comparison is between the two paths: the kernel ran in one and not in the other.
    expect(a.kernels).toContain(DECODE_ATTENTION_KERNEL);
    expect(b.kernels).not.toContain(DECODE_ATTENTION_KERNEL);
    expect(maxDiff(a.logits, b.logits)).toBeLessThan(1e-4);
    // Keys/values differ only by float32 rounding (of the norms, rotary and attention beneath them).
    a.kv.forEach((layer, l) => {
      layer.forEach((t, i) => {
        expect(maxDiff(t, b.kv[l]?.[i] as Float32Array)).toBeLessThan(1e-5);
      });
    });
    model.dispose();
  });
});
