import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { headLogProbs, vocabChunks } from "./chunked-head.js";

beforeAll(async () => {
  await selectBackend({ log: () => {} });
});

/** Deterministic pseudo-random numbers in [-scale, scale). */
function numbers(n: number, seed: number, scale: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

/** Float64 log-probs and entropies of `targets` under `softmax(h @ w / temperature)`, plain loops. */
function reference(
  h: Float32Array,
  w: Float32Array,
  N: number,
  d: number,
  V: number,
  targets: Int32Array,
  T: number,
) {
  const lp: number[] = [];
  const ent: number[] = [];
  for (let n = 0; n < N; n++) {
    const z = new Float64Array(V);
    for (let v = 0; v < V; v++) {
      let s = 0;
      for (let k = 0; k < d; k++) s += (h[n * d + k] as number) * (w[k * V + v] as number);
      z[v] = s / T;
    }
    const m = Math.max(...z);
    let sum = 0;
    for (const x of z) sum += Math.exp(x - m);
    const lse = m + Math.log(sum);
    lp.push((z[targets[n] as number] as number) - lse);
    let e = 0;
    for (const x of z) e -= Math.exp(x - lse) * (x - lse);
    ent.push(e);
  }
  return { lp, ent };
}

/** The plain tfjs formulation (full logits, log-softmax, one-hot pick), differentiated by tfjs itself. */
function naive(h: tf.Tensor2D, w: tf.Tensor2D, targets: Int32Array, T: number): tf.Tensor2D {
  const logp = tf.logSoftmax(tf.div(tf.matMul(h, w), T));
  const oneHot = tf.cast(tf.oneHot(tf.tensor1d(targets, "int32"), w.shape[1]), "float32");
  const lp = tf.sum(tf.mul(logp, oneHot), 1, true);
  const ent = tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), 1, true));
  return tf.concat([lp, ent], 1) as tf.Tensor2D;
}

function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)));
  return m;
}

const N = 24;
const d = 16;
const V = 1000;

describe("headLogProbs: log-probs and entropies through the head, chunked over the vocabulary", () => {
  const hData = numbers(N * d, 1, 1);
  const wData = numbers(d * V, 2, 1);
  const targets = Int32Array.from({ length: N }, (_, n) => (n * 397 + 11) % V);
  targets[0] = 0;
  targets[1] = V - 1;

  it("splits the vocabulary into aligned chunks that cover it once", () => {
    expect(vocabChunks(10, 1000, 1 << 22)).toEqual([[0, 1000]]);
    const chunks = vocabChunks(24, 1000, 24 * 300);
    expect(chunks[0]).toEqual([0, 256]);
    expect(chunks.at(-1)?.[1]).toBe(1000);
    for (let i = 1; i < chunks.length; i++) expect(chunks[i]?.[0]).toBe(chunks[i - 1]?.[1]);
    // Never narrower than 128 columns, however many rows.
    expect(vocabChunks(1_000_000, 1000, 1024)[0]).toEqual([0, 128]);
  });

  for (const [label, maxElements] of [
    ["one chunk", undefined],
    ["8 chunks", N * 128],
  ] as const) {
    for (const temperature of [1, 0.7]) {
      it(`${label}, temperature ${temperature}: matches a float64 reference; gradients match tfjs autodiff`, () => {
        const ref = reference(hData, wData, N, d, V, targets, temperature);
        const h = tf.tensor2d(hData, [N, d]);
        const w = tf.tensor2d(wData, [d, V]);
        const ours = tf.tidy(() => headLogProbs(h, w, targets, { temperature, entropy: true, maxElements }));
        const got = ours.arraySync() as number[][];
        expect(
          maxAbsDiff(
            got.map((r) => r[0] as number),
            ref.lp,
          ),
        ).toBeLessThan(1e-5);
        expect(
          maxAbsDiff(
            got.map((r) => r[1] as number),
            ref.ent,
          ),
        ).toBeLessThan(1e-5);
        // Some targets are unlikely, so the log-probs spread out (the check is not vacuous).
        expect(Math.min(...ref.lp)).toBeLessThan(-8);

        // A loss mixing both outputs with per-row weights exercises both gradient paths.
        const a = tf.tensor2d(numbers(N, 3, 1), [N, 1]);
        const b = tf.tensor2d(numbers(N, 4, 1), [N, 1]);
        const loss =
          (f: (h: tf.Tensor2D, w: tf.Tensor2D) => tf.Tensor2D) => (hh: tf.Tensor, ww: tf.Tensor) => {
            const out = f(hh as tf.Tensor2D, ww as tf.Tensor2D);
            return tf.sum(
              tf.add(tf.mul(tf.slice(out, [0, 0], [N, 1]), a), tf.mul(tf.slice(out, [0, 1], [N, 1]), b)),
            );
          };
        const [dhOurs, dwOurs] = tf.grads(
          loss((hh, ww) => headLogProbs(hh, ww, targets, { temperature, entropy: true, maxElements })),
        )([h, w]);
        const [dhRef, dwRef] = tf.grads(loss((hh, ww) => naive(hh, ww, targets, temperature)))([h, w]);
        expect(maxAbsDiff(dhOurs?.dataSync() ?? [], dhRef?.dataSync() ?? [])).toBeLessThan(1e-5);
        expect(maxAbsDiff(dwOurs?.dataSync() ?? [], dwRef?.dataSync() ?? [])).toBeLessThan(1e-5);
        expect(Math.max(...Array.from(dwRef?.dataSync() ?? [], Math.abs))).toBeGreaterThan(1e-2);
        tf.dispose([h, w, a, b, ours, dhOurs, dwOurs, dhRef, dwRef] as tf.Tensor[]);
      });
    }
  }

  it("log-probs only: one column, same values, gradient of the log-probs alone", () => {
    const h = tf.tensor2d(hData, [N, d]);
    const w = tf.tensor2d(wData, [d, V]);
    const only = headLogProbs(h, w, targets, { maxElements: N * 256 });
    expect(only.shape).toEqual([N, 1]);
    const ref = reference(hData, wData, N, d, V, targets, 1);
    expect(maxAbsDiff(only.dataSync(), ref.lp)).toBeLessThan(1e-5);
    const [dh] = tf.grads((hh: tf.Tensor) =>
      tf.sum(headLogProbs(hh as tf.Tensor2D, w, targets, { maxElements: N * 256 })),
    )([h]);
    const [dhRef] = tf.grads((hh: tf.Tensor) =>
      tf.sum(tf.slice(naive(hh as tf.Tensor2D, w, targets, 1), [0, 0], [N, 1])),
    )([h]);
    expect(maxAbsDiff(dh?.dataSync() ?? [], dhRef?.dataSync() ?? [])).toBeLessThan(1e-5);
    tf.dispose([h, w, only, dh, dhRef] as tf.Tensor[]);
  });

  it("peak memory of forward + backward stays near one chunk, not rows x vocabulary", async () => {
    const rows = 256;
    const vocab = 16384;
    const hh = tf.randomNormal([rows, d], 0, 1, "float32", 5) as tf.Tensor2D;
    const ww = tf.randomNormal([d, vocab], 0, 1, "float32", 6) as tf.Tensor2D;
    const t = Int32Array.from({ length: rows }, (_, n) => (n * 31) % vocab);
    const full = rows * vocab * 4;
    const peak = async (maxElements: number) => {
      const base = tf.memory().numBytes;
      const info = await tf.profile(() => {
        const [g] = tf.grads((x: tf.Tensor) =>
          tf.sum(headLogProbs(x as tf.Tensor2D, ww, t, { entropy: true, maxElements })),
        )([hh]);
        g?.dispose();
      });
      return info.peakBytes - base;
    };
    const chunked = await peak(rows * 256);
    const whole = await peak(rows * vocab);
    // A handful of [rows, 256] chunks at a time, far below one [rows, vocab] logits matrix.
    expect(chunked).toBeLessThan(full / 2);
    // In one chunk, several [rows, vocab] temporaries are alive at once.
    expect(whole).toBeGreaterThan(full);
    tf.dispose([hh, ww]);
  });
});
