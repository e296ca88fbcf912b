import * as tf from "@tensorflow/tfjs";

/**
 * Building blocks tuned for the WASM backend (see platform notes): matMul with transpose flags is ~10x
 * slower there than an explicit transpose followed by a plain matMul, and tfjs's stock matMul gradient
 * uses the flags, so `mm` carries its own gradient made of explicit transposes.
 */

function swapLast2(x: tf.Tensor): tf.Tensor {
  const r = x.rank;
  const perm = Array.from({ length: r }, (_, i) => i);
  perm[r - 1] = r - 2;
  perm[r - 2] = r - 1;
  return tf.transpose(x, perm);
}

/**
 * `a^T @ dy` for `a [.., M, K]`, `dy [.., M, N]`. WASM transposes are slow (a [2048,256] one costs as much
 * as the matmul), so when `a` is the wider operand (e.g. the MLP hidden layer) compute `(dy^T @ a)^T`
 * instead: it transposes `dy` and the small `[N, K]` product rather than `a`.
 */
function matMulTN(a: tf.Tensor, dy: tf.Tensor): tf.Tensor {
  const [M, K] = a.shape.slice(-2) as [number, number];
  const N = dy.shape[dy.rank - 1] as number;
  if (M * N + N * K < M * K) return swapLast2(tf.matMul(swapLast2(dy) as tf.Tensor3D, a as tf.Tensor3D));
  return tf.matMul(swapLast2(a) as tf.Tensor3D, dy as tf.Tensor3D);
}

/** `a @ b` (rank 2, or equal-batch rank 3/4) whose gradient uses explicit transposes. */
const mmFunc = (...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [a, b, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([a, b]);
  return {
    value: tf.matMul(a as tf.Tensor3D, b as tf.Tensor3D),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [sa, sb] = saved as [tf.Tensor, tf.Tensor];
      return [tf.matMul(dy as tf.Tensor3D, swapLast2(sb) as tf.Tensor3D), matMulTN(sa, dy)];
    },
  };
};

/** `a @ b` (rank 2, or equal-batch rank 3/4) whose gradient uses explicit transposes. */
export const mm = tf.customGrad(mmFunc) as (a: tf.Tensor, b: tf.Tensor) => tf.Tensor;

const mmNTFunc = (...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [a, b, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([a, b]);
  return {
    value: tf.matMul(a as tf.Tensor3D, b as tf.Tensor3D, false, true),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [sa, sb] = saved as [tf.Tensor, tf.Tensor];
      return [
        tf.matMul(dy as tf.Tensor3D, sb as tf.Tensor3D),
        tf.matMul(swapLast2(dy) as tf.Tensor3D, sa as tf.Tensor3D),
      ];
    },
  };
};

/**
 * `a @ b^T` for batched attention scores. Measured on WASM, the transpose-B flag is faster here than an
 * explicit transpose for the small `[T,dh] x [dh,T]` products (unlike the large dense ones); the gradient
 * still uses plain matmuls.
 */
export const mmNT = tf.customGrad(mmNTFunc) as (a: tf.Tensor, b: tf.Tensor) => tf.Tensor;

export function transposeLast2(x: tf.Tensor): tf.Tensor {
  return swapLast2(x);
}

/**
 * Sums over all leading axes of `x [..., F]`, as `ones[1,rows] @ x`: the gradient of a broadcast
 * gain/bias. tf.sum over axis 0 transposes the whole tensor first on WASM (as slow as a transpose); the
 * ones-row matmul takes the fast dense path (~50x faster for `[2048,256]`).
 */
function columnSums(x: tf.Tensor): tf.Tensor1D {
  const F = x.shape[x.rank - 1] as number;
  const rows = x.size / F;
  return tf.reshape(tf.matMul(tf.ones([1, rows]), tf.reshape(x, [rows, F])), [F]) as tf.Tensor1D;
}

const addBiasFunc = (...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [x, b] = args as [tf.Tensor, tf.Tensor];
  return { value: tf.add(x, b), gradFunc: (dy: tf.Tensor) => [dy, columnSums(dy)] };
};

/** `x + bias` with `bias [F]` broadcast over the rows of `x [..., F]`. */
export const addBias = tf.customGrad(addBiasFunc) as (x: tf.Tensor, bias: tf.Tensor) => tf.Tensor;

const affineFunc = (...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [x, g, b, save] = args as [tf.Tensor, tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([x, g]);
  return {
    value: tf.add(tf.mul(x, g), b),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [sx, sg] = saved as [tf.Tensor, tf.Tensor];
      return [tf.mul(dy, sg), columnSums(tf.mul(dy, sx)), columnSums(dy)];
    },
  };
};

/** `x * gain + bias` (per-feature), with the gain/bias gradients as ones-row matmuls. */
const affine = tf.customGrad(affineFunc) as (x: tf.Tensor, gain: tf.Tensor, bias: tf.Tensor) => tf.Tensor;

const scaleColumnsFunc = (...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
  const [x, g, save] = args as [tf.Tensor, tf.Tensor, tf.GradSaveFunc];
  save([x, g]);
  return {
    value: tf.mul(x, g),
    gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
      const [sx, sg] = saved as [tf.Tensor, tf.Tensor];
      return [tf.mul(dy, sg), columnSums(tf.mul(dy, sx))];
    },
  };
};

/** `x * gain` (per-feature gain over the last axis), the gain gradient as a ones-row matmul. */
export const scaleColumns = tf.customGrad(scaleColumnsFunc) as (x: tf.Tensor, gain: tf.Tensor) => tf.Tensor;

/** Layer norm over the last axis with gain and bias. */
export function layerNorm(x: tf.Tensor, gain: tf.Tensor, bias: tf.Tensor, eps = 1e-5): tf.Tensor {
  const mean = tf.mean(x, -1, true);
  const centered = tf.sub(x, mean);
  const variance = tf.mean(tf.square(centered), -1, true);
  return affine(tf.mul(centered, tf.rsqrt(tf.add(variance, eps))), gain, bias);
}

/** GELU, sigmoid approximation `x * sigmoid(1.702 x)`: two cheap ops (XNNPACK sigmoid) instead of tanh's six. */
export function gelu(x: tf.Tensor): tf.Tensor {
  return tf.mul(x, tf.sigmoid(tf.mul(x, 1.702)));
}

/** Above this many one-hot entries (e.g. a 150k vocabulary), the embedding gradient is a JS scatter-add. */
const ONE_HOT_LIMIT = 1 << 24;

/** `out[ids[n]] += dy[n]` for `out [V, d]`: the embedding gradient without a `[V, N]` one-hot. */
function scatterRows(dy: tf.Tensor2D, ids: Int32Array, V: number): tf.Tensor2D {
  const d = dy.shape[1];
  const src = dy.dataSync() as Float32Array;
  const out = new Float32Array(V * d);
  for (let n = 0; n < ids.length; n++) {
    const row = (ids[n] as number) * d;
    for (let j = 0; j < d; j++) out[row + j] = (out[row + j] as number) + (src[n * d + j] as number);
  }
  return tf.tensor2d(out, [V, d]);
}

/**
 * `table[ids]` (rows of an embedding table). Forward is a plain gather; the gradient (gather has none on
 * WASM: UnsortedSegmentSum is missing) is `onehot(ids)^T @ dy`, a dense matmul with the transposed
 * one-hot built directly in JS, so no one-hot matmul runs in the forward pass.
 */
export function embedRows(table: tf.Tensor2D, ids: Int32Array): tf.Tensor2D {
  const [V] = table.shape;
  const f = tf.customGrad(((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const t = args[0] as tf.Tensor2D;
    const idx = tf.tensor1d(ids, "int32");
    const value = tf.gather(t, idx);
    idx.dispose();
    return {
      value,
      gradFunc: (dy: tf.Tensor) => {
        if (V * ids.length > ONE_HOT_LIMIT) return [scatterRows(dy as tf.Tensor2D, ids, V)];
        const oneHotT = new Float32Array(V * ids.length);
        for (let n = 0; n < ids.length; n++) oneHotT[(ids[n] as number) * ids.length + n] = 1;
        return [tf.matMul(tf.tensor2d(oneHotT, [V, ids.length]), dy as tf.Tensor2D)];
      },
    };
  }) as never) as unknown as (t: tf.Tensor) => tf.Tensor2D;
  return f(table);
}

/**
 * `x[n, ids[n]]` for a `[N, V]` matrix (e.g. the log-probability of each target token). The gradient is
 * `onehot(ids) * dy` with the one-hot built in JS (no gather gradient needed).
 */
export function pickColumns(x: tf.Tensor2D, ids: Int32Array): tf.Tensor1D {
  const [N, V] = x.shape;
  const flatIdx = new Int32Array(N);
  for (let n = 0; n < N; n++) flatIdx[n] = n * V + (ids[n] as number);
  const f = tf.customGrad(((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const t = args[0] as tf.Tensor2D;
    const idx = tf.tensor1d(flatIdx, "int32");
    const value = tf.gather(tf.reshape(t, [N * V]), idx) as tf.Tensor1D;
    idx.dispose();
    return {
      value,
      gradFunc: (dy: tf.Tensor) => {
        const oneHot = new Float32Array(N * V);
        for (let n = 0; n < N; n++) oneHot[flatIdx[n] as number] = 1;
        return [tf.mul(tf.tensor2d(oneHot, [N, V]), tf.reshape(dy, [N, 1]))];
      },
    };
  }) as never) as unknown as (t: tf.Tensor) => tf.Tensor1D;
  return f(x);
}

/** Float one-hot rows. */
export function oneHotF(ids: tf.Tensor1D, depth: number): tf.Tensor2D {
  return tf.cast(tf.oneHot(ids, depth), "float32") as tf.Tensor2D;
}
