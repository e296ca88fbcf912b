import * as tf from "@tensorflow/tfjs";

/**
 * The output head fused with log-softmax and the target gather: `log p(target_n)` (and optionally the
 * entropy of each row's distribution) for hidden rows `h [N,d]` through a head `w [d,V]`, without ever
 * holding the `[N,V]` logits. The vocabulary is processed in column chunks of at most `maxElements`
 * logits each (an online log-sum-exp joins them), and the backward pass recomputes each chunk's logits
 * instead of keeping them, so peak memory is one chunk, not `N x V` (a 151,936-token vocabulary at 1,024
 * positions would need 620 MB per temporary otherwise). Only `[N]` numbers ever leave the device.
 */

/** Default logits per chunk (16 MiB of float32): large enough that small vocabularies take one chunk. */
export const DEFAULT_HEAD_CHUNK_ELEMENTS = 1 << 22;

export interface HeadLogProbsOptions {
  /** Logits are divided by this before the softmax (default 1). */
  temperature?: number;
  /** Also return each row's entropy (at the same temperature). */
  entropy?: boolean;
  /** Most logits materialised at once (default `DEFAULT_HEAD_CHUNK_ELEMENTS`). */
  maxElements?: number;
}

/** Column ranges `[start, end)` of the vocabulary chunks for `rows` rows. */
export function vocabChunks(rows: number, vocab: number, maxElements: number): Array<[number, number]> {
  // Multiples of 128 columns keep the matmul blocks aligned; never below 128 columns however many rows.
  const width = Math.min(vocab, Math.max(128, Math.floor(maxElements / Math.max(1, rows) / 128) * 128));
  const out: Array<[number, number]> = [];
  for (let c = 0; c < vocab; c += width) out.push([c, Math.min(vocab, c + width)]);
  return out;
}

interface Chunk {
  start: number;
  end: number;
  /** Flat index into the chunk's `[N, width]` logits of each row's target (0 for rows whose target is elsewhere). */
  index: Int32Array;
  /** Target column within the chunk, -1 when the target lies in another chunk (a zero one-hot row). */
  local: Int32Array;
  /** 1 where the row's target lies in this chunk. */
  inside: Float32Array;
  all: boolean;
}

function planChunks(targets: Int32Array, vocab: number, maxElements: number): Chunk[] {
  const N = targets.length;
  return vocabChunks(N, vocab, maxElements).map(([start, end]) => {
    const width = end - start;
    const index = new Int32Array(N);
    const local = new Int32Array(N).fill(-1);
    const inside = new Float32Array(N);
    let count = 0;
    for (let n = 0; n < N; n++) {
      const y = targets[n] as number;
      if (y >= start && y < end) {
        index[n] = n * width + (y - start);
        local[n] = y - start;
        inside[n] = 1;
        count++;
      }
    }
    return { start, end, index, local, inside, all: count === N };
  });
}

/**
 * Columns (`axis` 1) or rows (`axis` 0) `start..end` of `x`. A gather, not `tf.slice`: tfjs-wasm's slice
 * reads the whole input back into JS to copy a part of it, which would copy the full head once per chunk.
 */
function range(x: tf.Tensor2D, c: Chunk, axis: 0 | 1): tf.Tensor2D {
  const idx = tf.tensor1d(
    Int32Array.from({ length: c.end - c.start }, (_, i) => c.start + i),
    "int32",
  );
  return tf.gather(x, idx, axis);
}

/** Logits of one chunk, `h @ w[:, start:end] / temperature`. */
function chunkLogits(h: tf.Tensor2D, w: tf.Tensor2D, c: Chunk, single: boolean, invT: number): tf.Tensor2D {
  const wc = single ? w : range(w, c, 1);
  const z = tf.matMul(h, wc);
  return (invT === 1 ? z : tf.mul(z, invT)) as tf.Tensor2D;
}

/**
 * `[N, k]` statistics per row: column 0 the target log-prob, then (with entropy) the entropy, then the
 * log-sum-exp and (with entropy) the softmax mean of the logits — the last ones only for the backward pass.
 */
function forwardStats(
  h: tf.Tensor2D,
  w: tf.Tensor2D,
  chunks: Chunk[],
  invT: number,
  entropy: boolean,
): { stats: tf.Tensor2D; logits?: tf.Tensor2D } {
  const N = h.shape[0];
  const single = chunks.length === 1;
  let max: tf.Tensor | undefined;
  let sum: tf.Tensor | undefined;
  let zSum: tf.Tensor | undefined;
  let target: tf.Tensor | undefined;
  let kept: tf.Tensor2D | undefined;
  for (const c of chunks) {
    const next = tf.tidy(() => {
      const z = chunkLogits(h, w, c, single, invT);
      const m = tf.max(z, 1, true);
      const e = tf.exp(tf.sub(z, m));
      const s = tf.sum(e, 1, true);
      const zs = entropy ? tf.sum(tf.mul(e, z), 1, true) : undefined;
      let t = tf.reshape(tf.gather(tf.reshape(z, [-1]), tf.tensor1d(c.index, "int32")), [N, 1]);
      if (!c.all) t = tf.mul(t, tf.tensor2d(c.inside, [N, 1]));
      if (!max) return { m, s, zs, t, z: single ? z : undefined };
      // Online log-sum-exp: rescale both partial sums to the new running maximum.
      const M = tf.maximum(max, m);
      const a = tf.exp(tf.sub(max, M));
      const b = tf.exp(tf.sub(m, M));
      return {
        m: M,
        s: tf.add(tf.mul(sum as tf.Tensor, a), tf.mul(s, b)),
        zs: zs && tf.add(tf.mul(zSum as tf.Tensor, a), tf.mul(zs, b)),
        t: tf.add(target as tf.Tensor, t),
        z: undefined,
      };
    });
    tf.dispose([max, sum, zSum, target].filter((x): x is tf.Tensor => x !== undefined));
    max = next.m;
    sum = next.s;
    zSum = next.zs;
    target = next.t;
    kept = next.z as tf.Tensor2D | undefined;
  }
  const stats = tf.tidy(() => {
    const lse = tf.add(max as tf.Tensor, tf.log(sum as tf.Tensor));
    const lp = tf.sub(target as tf.Tensor, lse);
    if (!entropy) return tf.concat([lp, lse], 1);
    const mean = tf.div(zSum as tf.Tensor, sum as tf.Tensor);
    return tf.concat([lp, tf.sub(lse, mean), lse, mean], 1);
  }) as tf.Tensor2D;
  tf.dispose([max, sum, zSum, target].filter((x): x is tf.Tensor => x !== undefined));
  return { stats, logits: kept };
}

/**
 * Gradient of the chunk's logits: with `a = dL/dlp`, `b = dL/dH`, `p = softmax(z)`:
 * `dz = a * onehot - p * (a + b * (z - mean))`, then times `1/temperature`. The `a * onehot` term is
 * built in JS (`aData` is `a` read back: N numbers): tfjs-wasm's float32 `oneHot` writes integer bits.
 */
function chunkGrad(
  z: tf.Tensor2D,
  c: Chunk,
  stats: { lse: tf.Tensor; mean?: tf.Tensor; a: tf.Tensor; b?: tf.Tensor },
  aData: Float32Array,
  invT: number,
): tf.Tensor2D {
  const N = z.shape[0];
  const width = c.end - c.start;
  const p = tf.exp(tf.sub(z, stats.lse));
  const coef =
    stats.b && stats.mean
      ? tf.add(tf.mul(z, stats.b), tf.sub(stats.a, tf.mul(stats.b, stats.mean)))
      : stats.a;
  const picked = new Float32Array(N * width);
  for (let n = 0; n < N; n++)
    if ((c.local[n] as number) >= 0) picked[c.index[n] as number] = aData[n] as number;
  const g = tf.sub(tf.tensor2d(picked, [N, width]), tf.mul(p, coef));
  return (invT === 1 ? g : tf.mul(g, invT)) as tf.Tensor2D;
}

/**
 * `[N, 1]` log-probs of `targets` (or `[N, 2]`: log-probs and entropies with `entropy`), differentiable
 * with respect to `h` and `w`.
 */
export function headLogProbs(
  h: tf.Tensor2D,
  w: tf.Tensor2D,
  targets: Int32Array,
  options: HeadLogProbsOptions = {},
): tf.Tensor2D {
  const N = h.shape[0];
  const V = w.shape[1];
  if (targets.length !== N) throw new Error(`headLogProbs: ${targets.length} targets for ${N} rows`);
  const temperature = options.temperature ?? 1;
  if (!(temperature > 0)) throw new Error(`headLogProbs: temperature must be > 0, got ${temperature}`);
  const invT = 1 / temperature;
  const entropy = options.entropy ?? false;
  const chunks = planChunks(targets, V, options.maxElements ?? DEFAULT_HEAD_CHUNK_ELEMENTS);
  const single = chunks.length === 1;
  const op = tf.customGrad(((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const [hIn, wIn, save] = args as [tf.Tensor2D, tf.Tensor2D, tf.GradSaveFunc];
    const { stats, logits } = forwardStats(hIn, wIn, chunks, invT, entropy);
    // Saving is a no-op outside a gradient tape, so inference keeps nothing.
    save(logits ? [hIn, wIn, stats, logits] : [hIn, wIn, stats]);
    logits?.dispose();
    return {
      value: stats,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [sh, sw, sStats, sLogits] = saved as [tf.Tensor2D, tf.Tensor2D, tf.Tensor2D, tf.Tensor2D?];
        const col = (i: number) => tf.slice(sStats, [0, i], [N, 1]);
        const dcol = (i: number) => tf.slice(dy, [0, i], [N, 1]);
        const s = entropy
          ? { a: dcol(0), b: dcol(1), lse: col(2), mean: col(3) }
          : { a: dcol(0), lse: col(1) };
        const aData = s.a.dataSync() as Float32Array;
        const hT = tf.transpose(sh);
        const wT = tf.transpose(sw) as tf.Tensor2D;
        let dh: tf.Tensor | undefined;
        const dw: tf.Tensor[] = [];
        for (const c of chunks) {
          // One chunk's temporaries at a time: the backward pass runs inside one outer tidy.
          const next = tf.tidy(() => {
            const z = sLogits ?? chunkLogits(sh, sw, c, single, invT);
            const g = chunkGrad(z, c, s, aData, invT);
            const wTc = single ? wT : range(wT, c, 0);
            const part = tf.matMul(g, wTc);
            return { dh: dh ? tf.add(dh, part) : part, dw: tf.matMul(hT, g) };
          });
          dh?.dispose();
          dh = next.dh;
          dw.push(next.dw);
        }
        return [dh as tf.Tensor, dw.length === 1 ? (dw[0] as tf.Tensor) : tf.concat(dw, 1)];
      },
    };
  }) as never) as unknown as (h: tf.Tensor, w: tf.Tensor) => tf.Tensor2D;
  return tf.tidy(() => {
    const stats = op(h, w);
    return tf.slice(stats, [0, 0], [N, entropy ? 2 : 1]);
  });
}
