import * as tf from "@tensorflow/tfjs";
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import {
  APPEND_COLUMN_KERNEL,
  appendColumnFused,
  RMS_NORM_KERNEL,
  ROTARY_KERNEL,
  rmsNormFused,
  rotaryFused,
} from "./decode-kernels.js";
import { generationKernels } from "./decoder.js";
import { GATHER_ROWS_KERNEL, gatherRows } from "./gather-rows.js";
import { parseHfConfig } from "./hf-config.js";
import { applyRotary, rmsNorm } from "./layers.js";
import { PretrainedModel } from "./pretrained-model.js";
import { randomCheckpointConfig } from "./random-checkpoint.js";

/**
 * The generation kernels of decode-kernels.ts and gather-rows.ts (JavaScript over tfjs-wasm's heap)
 * against float64 references and the op-by-op paths they replace, and a whole decode step of a model
 * with q/k norms and grouped heads with the kernels on and off.
 */

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
});

/** Deterministic values in [-2, 2). */
function values(n: number, seed: number): Float32Array {
  let state = seed * 7919 + 1;
  return Float32Array.from({ length: n }, () => {
    state = (state * 1103515245 + 12345) % 2147483648;
    return (state / 2147483648) * 4 - 2;
  });
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)));
  return m;
};

/** Runs `f` and checks it leaves exactly its result allocated. */
function one<T extends tf.Tensor>(f: () => T): T {
  const before = tf.memory().numTensors;
  const out = f();
  expect(tf.memory().numTensors).toBe(before + 1);
  return out;
}

describe("RMSNorm kernel", () => {
  it("equals a float64 reference and the op path", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 20 }),
        fc.constantFrom(4, 7, 64, 100, 256),
        fc.constantFrom(1e-6, 1e-5, 0.1),
        fc.integer({ min: 0, max: 1000 }),
        (rows, d, eps, seed) => {
          const x = values(rows * d, seed);
          const w = values(d, seed + 1);
          const xt = tf.tensor2d(x, [rows, d]);
          const wt = tf.tensor1d(w);
          const got = one(() => rmsNormFused(xt, wt, eps));
          const ops = tf.tidy(() => rmsNorm(xt, wt, eps));
          const ref = new Float64Array(rows * d);
          for (let r = 0; r < rows; r++) {
            let ss = 0;
            for (let i = 0; i < d; i++) ss += (x[r * d + i] as number) ** 2;
            const inv = 1 / Math.sqrt(ss / d + eps);
            for (let i = 0; i < d; i++) ref[r * d + i] = (x[r * d + i] as number) * inv * (w[i] as number);
          }
          // |out| <= 2 * sqrt(d) here: float32 rounding of the product stays below 1e-5.
          expect(maxDiff(got.dataSync(), ref)).toBeLessThan(1e-5);
          expect(maxDiff(got.dataSync(), ops.dataSync())).toBeLessThan(1e-5);
          tf.dispose([xt, wt, got, ops]);
        },
      ),
      { numRuns: 40, seed: 28 },
    );
  });
});

describe("rotary kernel", () => {
  it("equals a float64 reference and the op path (partial rotation, shared or per-row tables)", () => {
    fc.assert(
      fc.property(
        fc.record({
          B: fc.integer({ min: 1, max: 4 }),
          H: fc.integer({ min: 1, max: 4 }),
          T: fc.integer({ min: 1, max: 3 }),
          dh: fc.constantFrom(4, 8, 16, 64),
          part: fc.constantFrom(1, 0.5),
          shared: fc.boolean(),
          seed: fc.integer({ min: 0, max: 1000 }),
        }),
        ({ B, H, T, dh, part, shared, seed }) => {
          const rot = dh * part;
          const rows = shared ? 1 : B;
          const x = values(B * H * T * dh, seed);
          const cos = values(rows * T * rot, seed + 1);
          const sin = values(rows * T * rot, seed + 2);
          const xt = tf.tensor4d(x, [B, H, T, dh]);
          const ct = tf.tensor4d(cos, [rows, 1, T, rot]);
          const st = tf.tensor4d(sin, [rows, 1, T, rot]);
          const got = one(() => rotaryFused(xt, ct, st));
          const ops = tf.tidy(() => applyRotary(xt, ct, st));
          const ref = new Float64Array(x.length);
          const half = rot / 2;
          for (let b = 0; b < B; b++)
            for (let h = 0; h < H; h++)
              for (let t = 0; t < T; t++) {
                const at = ((b * H + h) * T + t) * dh;
                const tab = ((shared ? 0 : b) * T + t) * rot;
                for (let j = 0; j < dh; j++) {
                  if (j >= rot) {
                    ref[at + j] = x[at + j] as number;
                    continue;
                  }
                  const swapped = x[at + (j < half ? j + half : j - half)] as number;
                  ref[at + j] =
                    (x[at + j] as number) * (cos[tab + j] as number) + swapped * (sin[tab + j] as number);
                }
              }
          expect(maxDiff(got.dataSync(), ref)).toBeLessThan(1e-5);
          expect(maxDiff(got.dataSync(), ops.dataSync())).toBeLessThan(1e-5);
          tf.dispose([xt, ct, st, got, ops]);
        },
      ),
      { numRuns: 40, seed: 28 },
    );
  });
});

describe("KV append and row gather kernels", () => {
  it("append equals concat along the time axis, bit for bit", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 40 }),
        fc.constantFrom(1, 4, 64),
        (B, H, L, dh) => {
          const c = tf.tensor4d(values(B * H * L * dh, L), [B, H, L, dh]);
          const col = tf.tensor4d(values(B * H * dh, L + 7), [B, H, 1, dh]);
          const got = one(() => appendColumnFused(c, col));
          const want = tf.concat([c, col], 2);
          expect(got.shape).toEqual([B, H, L + 1, dh]);
          expect(Array.from(got.dataSync())).toEqual(Array.from(want.dataSync()));
          tf.dispose([c, col, got, want]);
        },
      ),
      { numRuns: 40, seed: 28 },
    );
  });

  it("row gather equals tf.gather on axis 0 (repeats, any order, 2-D and 4-D, int32)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.constantFrom([5], [2, 3, 4], [1, 1, 1]),
        fc.integer({ min: 0, max: 8 }),
        fc.boolean(),
        fc.integer({ min: 0, max: 1000 }),
        (N, rest, count, ints, seed) => {
          const size = N * rest.reduce<number>((a, b) => a * b, 1);
          const data = values(size, seed);
          const x = ints
            ? tf.tensor(
                Int32Array.from(data, (v) => Math.round(v * 1000)),
                [N, ...rest],
                "int32",
              )
            : tf.tensor(data, [N, ...rest]);
          const rows = Array.from(values(count, seed + 3), (v) => Math.floor(((v + 2) / 4) * N));
          const got = one(() => gatherRows(x, rows));
          const want = tf.gather(x, tf.tensor1d(rows, "int32"), 0);
          expect(got.shape).toEqual(want.shape);
          expect(got.dtype).toBe(x.dtype);
          expect(Array.from(got.dataSync())).toEqual(Array.from(want.dataSync()));
          tf.dispose([x, got, want]);
        },
      ),
      { numRuns: 60, seed: 28 },
    );
  });

  it("row gather rejects rows outside the tensor with a RangeError and allocates nothing", () => {
    const x = tf.zeros([3, 2]);
    const before = tf.memory().numTensors;
    expect(() => gatherRows(x, [0, 3])).toThrow(RangeError);
    expect(() => gatherRows(x, [-1])).toThrow(RangeError);
    expect(() => gatherRows(x, [1.5])).toThrow(RangeError);
    expect(tf.memory().numTensors).toBe(before);
    x.dispose();
  });
});

describe("a decode step with the generation kernels on and off", () => {
  it("gives the same logits and keys/values (qwen3: q/k norms, grouped heads, padded rows)", async () => {
    const { arch } = parseHfConfig(
      randomCheckpointConfig({ family: "qwen3", seed: 4, numHeads: 4, numKvHeads: 2, vocabSize: 300 }),
    );
    expect(arch.qkNorm).toBe(true);
    const model = PretrainedModel.random(arch, 4, { std: 0.1 });
    const prompts = [
      [5, 9, 12, 40, 7],
      [8, 8, 100, 3, 2],
      [250, 1, 77, 30, 6],
    ];
    const run = async (on: boolean) => {
      generationKernels.enabled = on;
      try {
        const pre = model.prefillMany(prompts);
        const bias = tf.tensor4d([0, 0, 0, 0, 0, 0, -1e9, -1e9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], [3, 1, 1, 6]);
        let r!: ReturnType<typeof model.decodeStep>;
        const { kernelNames } = await tf.profile(() => {
          r = model.decodeStep([4, 50, 99], [5, 5, 5], pre.cache, bias);
          return [];
        });
        const kv = r.cache.map((c) => [c.k.dataSync().slice(), c.v.dataSync().slice()]);
        tf.dispose([bias, ...pre.cache.flatMap((c) => [c.k, c.v]), ...r.cache.flatMap((c) => [c.k, c.v])]);
        return { prefill: pre.logits, logits: r.logits, kv, kernelNames };
      } finally {
        generationKernels.enabled = true;
      }
    };
    const on = await run(true);
    const off = await run(false);
    for (const k of [RMS_NORM_KERNEL, ROTARY_KERNEL, APPEND_COLUMN_KERNEL, GATHER_ROWS_KERNEL]) {
      expect(on.kernelNames).toContain(k);
      expect(off.kernelNames).not.toContain(k);
    }
    expect(maxDiff(on.prefill, off.prefill)).toBeLessThan(1e-4);
    expect(maxDiff(on.logits, off.logits)).toBeLessThan(1e-4);
    on.kv.forEach((layer, l) => {
      layer.forEach((t, i) => {
        expect(maxDiff(t, off.kv[l]?.[i] as Float32Array)).toBeLessThan(1e-5);
      });
    });
    model.dispose();
  });
});
