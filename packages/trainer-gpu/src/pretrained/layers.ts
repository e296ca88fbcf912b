import * as tf from "@tensorflow/tfjs";
import { mm, mmNT, scaleColumns } from "../model/ops.js";

/**
 * The building blocks of the Llama/Qwen decoder layer on top of the WASM-tuned ops (custom-gradient
 * matmuls, ones-row gain gradients): RMSNorm, SiLU gate, rotary embeddings, grouped-query attention.
 */

/** RMSNorm over the last axis: `x / sqrt(mean(x^2) + eps) * weight`. */
export function rmsNorm(x: tf.Tensor, weight: tf.Tensor, eps: number): tf.Tensor {
  const ms = tf.mean(tf.square(x), -1, true);
  return scaleColumns(tf.mul(x, tf.rsqrt(tf.add(ms, eps))), weight);
}

/** `silu(gate) * up`. */
export function siluGate(gate: tf.Tensor, up: tf.Tensor): tf.Tensor {
  return tf.mul(tf.mul(gate, tf.sigmoid(gate)), up);
}

/**
 * Rotate `x [B,H,T,dh]` in the rotate-half convention, `x*cos + rotate_half(x)*sin` over the first `rot`
 * dimensions (the rest pass through). `cos` is the cos table and `sinSigned` the sin table with its first
 * half negated (`[B|1, 1, T, rot]`, see `RotaryCache`), so `rotate_half(x)*sin` is `swap_halves(x)*sinSigned`.
 * The half swap is a product with a 0/1 permutation matrix: exact (each output is one input times 1 plus
 * zeros), and on WASM a small dense matmul costs a fraction of `tf.reverse` (a generic strided copy that
 * was ~12% of a 16-row decode step) or of two slices and a concat.
 */
export function applyRotary(x: tf.Tensor4D, cos: tf.Tensor, sinSigned: tf.Tensor): tf.Tensor4D {
  const [B, H, T, dh] = x.shape;
  const rot = cos.shape[cos.rank - 1] as number;
  const xr = rot === dh ? x : tf.slice(x, [0, 0, 0, 0], [B, H, T, rot]);
  const swapped = tf.reshape(tf.matMul(tf.reshape(xr, [B * H * T, rot]) as tf.Tensor2D, halfSwap(rot)), [
    B,
    H,
    T,
    rot,
  ]);
  const rotated = tf.add(tf.mul(xr, cos), tf.mul(swapped, sinSigned)) as tf.Tensor4D;
  if (rot === dh) return rotated;
  return tf.concat([rotated, tf.slice(x, [0, 0, 0, rot], [B, H, T, dh - rot])], 3) as tf.Tensor4D;
}

const swaps = new Map<number, Float32Array>();

/** The `[rot, rot]` matrix that swaps the two halves of a row (`x @ P`); a fresh tensor the caller's scope owns. */
function halfSwap(rot: number): tf.Tensor2D {
  let p = swaps.get(rot);
  if (!p) {
    const h = rot / 2;
    p = new Float32Array(rot * rot);
    for (let i = 0; i < h; i++) {
      p[i * rot + i + h] = 1;
      p[(i + h) * rot + i] = 1;
    }
    swaps.set(rot, p);
  }
  return tf.tensor2d(p, [rot, rot]);
}

/**
 * Scaled dot-product attention with grouped key/value heads, without repeating keys and values: the
 * `g = H / Hkv` query heads sharing a key head are stacked along the time axis (`[B,Hkv,g*T,dh]`), so one
 * batched product serves the whole group. `bias` (`[B|1, 1, g*T|1, L]`, see `groupBias`) is added to the
 * scores.
 */
export function groupedAttention(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  bias: tf.Tensor,
  scale: number,
): tf.Tensor4D {
  const [B, H, T, dh] = q.shape;
  const Hkv = k.shape[1];
  const g = H / Hkv;
  const qs = g === 1 ? q : tf.reshape(q, [B, Hkv, g * T, dh]);
  const scores = tf.add(mmNT(tf.mul(qs, scale), k), bias);
  const out = mm(tf.softmax(scores), v);
  return (g === 1 ? out : tf.reshape(out, [B, H, T, dh])) as tf.Tensor4D;
}

/** An attention bias `[B|1, 1, T, L]` repeated for the `g` query heads stacked per key head (once per forward). */
export function groupBias(bias: tf.Tensor, g: number): tf.Tensor {
  return g > 1 && bias.shape[2] !== 1 ? tf.tile(bias, [1, 1, g, 1]) : bias;
}
