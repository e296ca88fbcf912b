import * as tf from "@tensorflow/tfjs";
import type { IdsInput, MaskInput } from "./causal-lm.js";
import { pickColumns } from "./ops.js";

/** Shared input handling of the package's causal LMs: id batches, padding masks, target log-probs. */

export const NEG_INF = -1e9;

export function toRows(x: IdsInput | MaskInput): number[][] {
  if (x instanceof tf.Tensor) return x.arraySync() as number[][];
  return x.map((r) => Array.from(r));
}

export interface BatchInputs {
  rows: number[][];
  B: number;
  T: number;
  /** Row-major ids `[B*T]`. */
  flat: Int32Array;
  /**
   * With an attention mask: each token's position counting real tokens only (so a left-padded row gets
   * the numbers it would get alone) and an additive key bias `[B*T]` masking padding.
   */
  positions?: Int32Array;
  keyBias?: Float32Array;
}

export function batchInputs(
  inputIds: IdsInput,
  attentionMask: MaskInput | undefined,
  contextLength: number,
): BatchInputs {
  const rows = toRows(inputIds);
  const B = rows.length;
  const T = rows[0]?.length ?? 0;
  if (B === 0 || T === 0) throw new Error("forward needs a non-empty [B,T] batch");
  checkLength(T, contextLength);
  const flat = new Int32Array(B * T);
  rows.forEach((r, b) => {
    if (r.length !== T) throw new Error("all rows of inputIds must have the same length");
    flat.set(r, b * T);
  });
  if (!attentionMask) return { rows, B, T, flat };
  const mask = toRows(attentionMask);
  const positions = new Int32Array(B * T);
  const keyBias = new Float32Array(B * T);
  mask.forEach((r, b) => {
    let seen = 0;
    for (let t = 0; t < T; t++) {
      const m = r[t] ?? 0;
      if (m) seen++;
      positions[b * T + t] = Math.max(0, seen - 1);
      keyBias[b * T + t] = m ? 0 : NEG_INF;
    }
  });
  return { rows, B, T, flat, positions, keyBias };
}

export function checkLength(T: number, contextLength: number): void {
  if (T > contextLength) {
    throw new Error(`Sequence length ${T} exceeds the model's context length ${contextLength}`);
  }
}

/** Additive causal masks `[1,1,T,T]`, sliced from one cached mask as large as the longest T seen. */
export class CausalMasks {
  private full: tf.Tensor | undefined;
  private size = 0;

  get(T: number): tf.Tensor {
    if (T > this.size) {
      this.full?.dispose();
      const data = new Float32Array(T * T);
      for (let i = 0; i < T; i++) data.fill(NEG_INF, i * T + i + 1, (i + 1) * T);
      this.full = tf.keep(tf.tensor4d(data, [1, 1, T, T]));
      this.size = T;
    }
    const full = this.full as tf.Tensor;
    return T === this.size ? full : tf.slice(full, [0, 0, 0, 0], [1, 1, T, T]);
  }

  dispose(): void {
    this.full?.dispose();
    this.full = undefined;
    this.size = 0;
  }
}

/**
 * log p(rows[:, t+1] | rows[:, <= t]) `[B,T-1]` from logits `[B,T,V]` at `temperature`, and optionally
 * the entropy of each next-token distribution.
 */
export function targetLogProbs(
  logits3: tf.Tensor3D,
  rows: number[][],
  temperature: number,
  withEntropy: boolean,
): { logProbs: tf.Tensor2D; entropy?: tf.Tensor2D } {
  const [B, T, V] = logits3.shape;
  let logits: tf.Tensor = tf.slice(logits3, [0, 0, 0], [B, T - 1, V]);
  if (temperature !== 1) logits = tf.div(logits, temperature);
  const lp = tf.logSoftmax(logits);
  const targets = new Int32Array(B * (T - 1));
  rows.forEach((r, b) => {
    targets.set(r.slice(1), b * (T - 1));
  });
  const logProbs = tf.reshape(pickColumns(tf.reshape(lp, [B * (T - 1), V]) as tf.Tensor2D, targets), [
    B,
    T - 1,
  ]) as tf.Tensor2D;
  if (!withEntropy) return { logProbs };
  const entropy = tf.neg(tf.sum(tf.mul(tf.exp(lp), lp), -1)) as tf.Tensor2D;
  return { logProbs, entropy };
}

/** Length of the longest prefix all rows share (token ids), at most `T - 1` so every row keeps a suffix. */
export function commonPrefixLength(rows: readonly (readonly number[])[]): number {
  const first = rows[0];
  if (!first) return 0;
  const T = Math.min(...rows.map((r) => r.length));
  let p = 0;
  while (p < T - 1 && rows.every((r) => r[p] === first[p])) p++;
  return p;
}
