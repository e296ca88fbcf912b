import * as tf from "@tensorflow/tfjs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { DECODE_ATTENTION_KERNEL, decodeAttention, hasDecodeAttention } from "./decode-attention.js";
import { generationKernels } from "./decoder.js";
import { parseHfConfig } from "./hf-config.js";
import { groupBias, groupedAttention } from "./layers.js";
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
  /** Queries per row (a decode step 1, a prefill the new tokens, each seeing the keys up to its own). */
  T: number;
  dh: number;
  /** Masked leading columns per row (left padding of a right-aligned batch cache). */
  pads: number[];
  shared: boolean;
  seed: number;
}

/** softmax(scale q.k + bias) . v in float64, one row, head and query at a time. */
function reference(q: Float32Array, k: Float32Array, v: Float32Array, bias: Float32Array, c: Case) {
  const H = c.Hkv * c.g;
  const out = new Float64Array(c.B * H * c.T * c.dh);
  for (let b = 0; b < c.B; b++)
    for (let hq = 0; hq < H * c.T; hq++) {
      // Query t of head h sits at h*T + t of [B,H,T,dh].
      const h = Math.floor(hq / c.T);
      const tq = hq % c.T;
      const kvh = Math.floor(h / c.g);
      const s: number[] = [];
      for (let t = 0; t < c.L; t++) {
        let dot = 0;
        for (let i = 0; i < c.dh; i++)
          dot +=
            (q[(b * H * c.T + hq) * c.dh + i] as number) *
            (k[((b * c.Hkv + kvh) * c.L + t) * c.dh + i] as number);
        s.push(dot / Math.sqrt(c.dh) + (bias[((c.shared ? 0 : b) * c.T + tq) * c.L + t] as number));
      }
      const max = Math.max(...s);
      const e = s.map((x) => Math.exp(x - max));
      const z = e.reduce((x, y) => x + y, 0);
      for (let t = 0; t < c.L; t++)
        for (let i = 0; i < c.dh; i++)
          out[(b * H * c.T + hq) * c.dh + i] =
            (out[(b * H * c.T + hq) * c.dh + i] as number) +
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
  const q = Float32Array.from({ length: c.B * H * c.T * c.dh }, rand);
  const k = Float32Array.from({ length: c.B * c.Hkv * c.L * c.dh }, rand);
  const v = Float32Array.from({ length: c.B * c.Hkv * c.L * c.dh }, rand);
  const rows = c.shared ? 1 : c.B;
  // Per row and query: the row's padding columns, and (T > 1) the keys after the query's own position.
  const bias = new Float32Array(rows * c.T * c.L);
  for (let b = 0; b < rows; b++)
    for (let t = 0; t < c.T; t++) {
      const at = (b * c.T + t) * c.L;
      bias.fill(-1e9, at, at + (c.pads[b] ?? 0));
      bias.fill(-1e9, at + c.L - c.T + t + 1, at + c.L);
    }
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
    T: fc.constantFrom(1, 1, 2, 5),
    dh: fc.constantFrom(4, 8, 16, 64, 128),
    shared: fc.boolean(),
    seed: fc.integer({ min: 0, max: 1000 }),
  })
  .chain((c) =>
    fc.record({
      ...Object.fromEntries(Object.entries(c).map(([key, x]) => [key, fc.constant(x)])),
      T: fc.constant(Math.min(c.T, c.L)),
      // Every query keeps at least its own key: padding stays left of the first query's position.
      pads: fc.array(fc.integer({ min: 0, max: c.L - Math.min(c.T, c.L) }), {
        minLength: c.B,
        maxLength: c.B,
      }),
    }),
  ) as fc.Arbitrary<Case>;

describe("fused decode attention (wasm)", () => {
  it("runs on the wasm backend for head sizes that are multiples of 4", () => {
    expect(tf.getBackend()).toBe("wasm");
    expect(hasDecodeAttention(64)).toBe(true);
    expect(hasDecodeAttention(6)).toBe(false);
  });

  it("equals a float64 reference and the op-by-op path (grouped heads, padding, shared bias, prefill queries)", () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const { q, k, v, bias, H, rows } = inputs(c);
        const qt = tf.tensor4d(q, [c.B, H, c.T, c.dh]);
        const kt = tf.tensor4d(k, [c.B, c.Hkv, c.L, c.dh]);
        const vt = tf.tensor4d(v, [c.B, c.Hkv, c.L, c.dh]);
        const bt = tf.tensor4d(bias, [rows, 1, c.T, c.L]);
        const before = tf.memory().numTensors;
        const fused = decodeAttention(qt, kt, vt, bt, 1 / Math.sqrt(c.dh));
        expect(tf.memory().numTensors).toBe(before + 1);
        const ops = tf.tidy(() => groupedAttention(qt, kt, vt, groupBias(bt, c.g), 1 / Math.sqrt(c.dh)));
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
