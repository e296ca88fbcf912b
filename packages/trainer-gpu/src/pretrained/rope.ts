import * as tf from "@tensorflow/tfjs";
import type { RopeConfig } from "./hf-config.js";

/**
 * Rotary position embeddings: inverse frequencies for the `default`, `linear` and `llama3` rope types,
 * rounded to float32 at the same steps as the reference implementation so cos/sin tables match it.
 */

const f32 = Math.fround;

/** Number of dimensions of each head that rotate (the rest pass through). */
export function rotaryDim(headDim: number, rope: RopeConfig): number {
  return Math.floor(headDim * rope.partialRotaryFactor);
}

/** Inverse frequencies `[rotaryDim / 2]`. */
export function inverseFrequencies(headDim: number, rope: RopeConfig): Float32Array {
  const dim = rotaryDim(headDim, rope);
  const inv = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) inv[i] = f32(1 / f32(rope.theta ** f32((2 * i) / dim)));
  if (rope.type === "linear")
    for (let i = 0; i < inv.length; i++) inv[i] = f32((inv[i] as number) / rope.factor);
  if (rope.type === "llama3") {
    const old = rope.originalMaxPositionEmbeddings;
    const lowWavelen = old / rope.lowFreqFactor;
    const highWavelen = old / rope.highFreqFactor;
    for (let i = 0; i < inv.length; i++) {
      const f = inv[i] as number;
      const wavelen = (2 * Math.PI) / f;
      if (wavelen > lowWavelen) inv[i] = f32(f / rope.factor);
      else if (wavelen >= highWavelen) {
        // Between the two wavelengths: interpolate between the scaled and the original frequency.
        const smooth = (old / wavelen - rope.lowFreqFactor) / (rope.highFreqFactor - rope.lowFreqFactor);
        inv[i] = f32((1 - smooth) * (f / rope.factor) + smooth * f);
      }
    }
  }
  return inv;
}

/**
 * cos and sin tables `[positions, rotaryDim]` for positions `0..n-1`, each half repeated (the
 * rotate-half convention: dimension j and j + rotaryDim/2 share a frequency).
 */
export function rotaryTables(
  n: number,
  headDim: number,
  rope: RopeConfig,
): { cos: Float32Array; sin: Float32Array } {
  const inv = inverseFrequencies(headDim, rope);
  const half = inv.length;
  const dim = 2 * half;
  const cos = new Float32Array(n * dim);
  const sin = new Float32Array(n * dim);
  for (let p = 0; p < n; p++) {
    for (let j = 0; j < half; j++) {
      const angle = f32(p * (inv[j] as number));
      const c = Math.cos(angle);
      const s = Math.sin(angle);
      cos[p * dim + j] = c;
      cos[p * dim + j + half] = c;
      sin[p * dim + j] = s;
      sin[p * dim + j + half] = s;
    }
  }
  return { cos, sin };
}

/** cos/sin tables of one model, grown on demand (doubling) up to its context length. */
export class RotaryCache {
  private table: { cos: Float32Array; sin: Float32Array; n: number } | undefined;
  private readonly rot: number;

  constructor(
    private readonly headDim: number,
    private readonly rope: RopeConfig,
    private readonly contextLength: number,
  ) {
    this.rot = rotaryDim(headDim, rope);
  }

  /**
   * cos and signed sin (first half negated, see `applyRotary`) `[B,1,T,rot]` for flat positions `[B*T]`; rows at the same positions (no padding) share one
   * `[1,1,T,rot]` table that broadcasts over the batch.
   */
  tables(positions: Int32Array, B: number, T: number): { cos: tf.Tensor4D; sin: tf.Tensor4D } {
    let max = 0;
    for (const p of positions) if (p > max) max = p;
    if (!this.table || this.table.n <= max) {
      const n = Math.max(
        max + 1,
        Math.min(this.contextLength, Math.max(256, 2 ** Math.ceil(Math.log2(max + 1)))),
      );
      this.table = { ...rotaryTables(n, this.headDim, this.rope), n };
    }
    const { rot, table } = this;
    let rows = B;
    if (B > 1 && positions.every((p, i) => p === positions[i % T])) rows = 1;
    const count = rows * T;
    const cos = new Float32Array(count * rot);
    const sin = new Float32Array(count * rot);
    for (let i = 0; i < count; i++) {
      const p = positions[i] as number;
      cos.set(table.cos.subarray(p * rot, (p + 1) * rot), i * rot);
      sin.set(table.sin.subarray(p * rot, (p + 1) * rot), i * rot);
      // The first half enters negated: rotate_half(x) * sin = swap_halves(x) * [-sin, sin].
      for (let j = 0; j < rot / 2; j++) sin[i * rot + j] = -(sin[i * rot + j] as number);
    }
    return { cos: tf.tensor4d(cos, [rows, 1, T, rot]), sin: tf.tensor4d(sin, [rows, 1, T, rot]) };
  }
}
