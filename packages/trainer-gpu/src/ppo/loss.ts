import * as tf from "@tensorflow/tfjs-core";
import type { KlEstimator, LossAggMode } from "./config.js";

/**
 * The PPO objective on tensors, as VERL's `core_algos.py` defines it. All per-token tensors are
 * `[rows, tokens]` float32 in the same layout; `mask` is 0/1.
 *
 * Aggregation is by explicit per-token weights (`aggregationWeights`) computed over a whole
 * mini-batch, so the losses of its micro-batches add up to exactly the mini-batch loss and
 * gradient accumulation needs no rescaling.
 */

/** The value of `x` with no gradient flowing back (tfjs has no stopGradient op). */
export const detach = tf.customGrad(((x: tf.Tensor) => ({
  value: tf.clone(x),
  gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy),
})) as any) as <T extends tf.Tensor>(x: T) => T;

/** Log-probs of `targets` and the entropy of each position's distribution, from logits `[B, T, V]`. */
export function tokenLogprobsAndEntropy(
  logits: tf.Tensor3D,
  targets: tf.Tensor2D,
): { logprobs: tf.Tensor2D; entropy: tf.Tensor2D } {
  return tf.tidy(() => {
    const logp = tf.logSoftmax(logits);
    // One-hot x log-softmax instead of gather: gather has no gradient on the wasm backend.
    const onehot = tf.oneHot(tf.cast(targets, "int32"), logits.shape[2]);
    const logprobs = tf.sum(tf.mul(logp, onehot), -1) as tf.Tensor2D;
    const entropy = tf.neg(tf.sum(tf.mul(tf.exp(logp), logp), -1)) as tf.Tensor2D;
    return { logprobs, entropy };
  });
}

/**
 * Per-token KL estimate between the policy and the reference policy.
 * kl/k1: log p - log q; abs: |log p - log q|; mse/k2: 0.5 (log p - log q)^2;
 * low_var_kl/k3: exp(q - p) - (q - p) - 1, clamped to [-10, 10] (Schulman's unbiased low-variance form).
 */
export function klPenalty(logprob: tf.Tensor, refLogprob: tf.Tensor, type: KlEstimator): tf.Tensor {
  return tf.tidy(() => {
    const diff = tf.sub(logprob, refLogprob);
    switch (type) {
      case "kl":
      case "k1":
        return diff;
      case "abs":
        return tf.abs(diff);
      case "mse":
      case "k2":
        return tf.mul(0.5, tf.square(diff));
      case "low_var_kl":
      case "k3": {
        const kl = tf.clipByValue(tf.neg(diff), -20, 20);
        return tf.clipByValue(tf.sub(tf.sub(tf.exp(kl), kl), 1), -10, 10);
      }
    }
  });
}

/**
 * Per-token weights that turn a masked sum into the chosen aggregation over the given rows:
 * - token-mean: 1 / (masked tokens in the mini-batch);
 * - seq-mean-token-sum: 1 / rows;
 * - seq-mean-token-mean: 1 / (rows x the row's masked tokens);
 * - seq-mean-token-sum-norm (VERL, Dr. GRPO): 1 / (rows x `lossScaleFactor`), a constant length
 *   normaliser (the PPO step passes `loss_scale_factor`, else `data.max_response_length` as VERL
 *   does; called without one, the longest row);
 * - per_rollout_mean (Agent Lightning v1.0): 1 / max(1, rows x the rollout's masked tokens over all its
 *   rows), a masked sum in which each rollout weighs the same however many rows it produced. As in
 *   v1.0 the divisor counts trained rows (not rollouts), so with several rows per rollout the loss is
 *   smaller than a mean over rollouts; rows and tokens are counted over the mini-batch given, which is
 *   the whole step when it forms one mini-batch (the default).
 */
export function aggregationWeights(
  mask: readonly (readonly number[])[],
  mode: LossAggMode,
  rolloutIds?: readonly string[],
  lossScaleFactor?: number,
): number[][] {
  const rowTokens = mask.map((row) => row.reduce((a, b) => a + b, 0));
  const total = rowTokens.reduce((a, b) => a + b, 0);
  const rows = mask.length;
  let perRow: number[];
  if (mode === "token-mean") perRow = rowTokens.map(() => (total > 0 ? 1 / total : 0));
  else if (mode === "seq-mean-token-sum") perRow = rowTokens.map(() => 1 / rows);
  else if (mode === "seq-mean-token-mean") perRow = rowTokens.map((n) => (n > 0 ? 1 / (rows * n) : 0));
  else if (mode === "seq-mean-token-sum-norm") {
    const scale = lossScaleFactor ?? Math.max(1, ...mask.map((row) => row.length));
    perRow = rowTokens.map(() => 1 / (rows * scale));
  } else {
    if (!rolloutIds) throw new Error("per_rollout_mean aggregation needs the rows' rollout ids");
    const byRollout = new Map<string, number>();
    for (const [i, id] of rolloutIds.entries()) byRollout.set(id, (byRollout.get(id) ?? 0) + rowTokens[i]!);
    perRow = rolloutIds.map((id) => 1 / Math.max(1, rows * byRollout.get(id)!));
  }
  return mask.map((row, i) => row.map((m) => m * perRow[i]!));
}

/** Sum of `values * weights` (weights already carry the mask). */
export function weightedSum(values: tf.Tensor, weights: tf.Tensor): tf.Scalar {
  return tf.tidy(() => tf.sum(tf.mul(values, weights)) as tf.Scalar);
}

/** Single-batch aggregation helper (VERL's `agg_loss`). */
export function aggLoss(
  values: tf.Tensor2D,
  mask: number[][],
  mode: LossAggMode,
  rolloutIds?: string[],
  lossScaleFactor?: number,
): tf.Scalar {
  return tf.tidy(() =>
    weightedSum(values, tf.tensor2d(aggregationWeights(mask, mode, rolloutIds, lossScaleFactor))),
  );
}

export interface PolicyLossInput {
  logprob: tf.Tensor2D;
  oldLogprob: tf.Tensor2D;
  advantages: tf.Tensor2D;
  /** Aggregation weights (mask included). */
  weights: tf.Tensor2D;
  /** Token-mean weights over the same mini-batch, for the metrics. */
  metricWeights: tf.Tensor2D;
  clipLow: number;
  clipHigh: number;
  /** Dual-clip constant (> 1) bounding the loss of negative-advantage tokens. */
  clipC: number;
  /** Truncated importance weights old/rollout (already capped), or null. */
  tisWeights?: tf.Tensor2D | null;
}

export interface PolicyLossOutput {
  loss: tf.Scalar;
  /** Fraction of tokens where the clipped term was active. */
  clipfrac: tf.Scalar;
  /** Fraction of negative-advantage tokens bounded by the dual clip. */
  clipfracLower: tf.Scalar;
  /** Mean of old - new log-prob (approximate KL to the sampling policy). */
  ppoKl: tf.Scalar;
}

/** Clipped PPO with separate low/high ratios and dual clip. */
export function policyLoss(input: PolicyLossInput): PolicyLossOutput {
  return tf.tidy(() => {
    const negApproxKl = tf.clipByValue(tf.sub(input.logprob, input.oldLogprob), -20, 20);
    const ratio = tf.exp(negApproxKl);
    const ppoKl = weightedSum(tf.neg(negApproxKl), input.metricWeights);
    const adv = input.advantages;
    const loss1 = tf.mul(tf.neg(adv), ratio);
    const loss2 = tf.mul(tf.neg(adv), tf.clipByValue(ratio, 1 - input.clipLow, 1 + input.clipHigh));
    const clipped1 = tf.maximum(loss1, loss2);
    const clipfrac = weightedSum(tf.cast(tf.greater(loss2, loss1), "float32"), input.metricWeights);
    const loss3 = tf.mul(tf.neg(adv), input.clipC);
    const clipped2 = tf.minimum(loss3, clipped1);
    const negative = tf.less(adv, 0);
    const clipfracLower = weightedSum(
      tf.mul(tf.cast(tf.greater(clipped1, loss3), "float32"), tf.cast(negative, "float32")),
      input.metricWeights,
    );
    let losses = tf.where(negative, clipped2, clipped1);
    if (input.tisWeights) losses = tf.mul(losses, input.tisWeights);
    return { loss: weightedSum(losses, input.weights), clipfrac, clipfracLower, ppoKl };
  });
}

/** min(exp(old - rollout), cap) on trained tokens: truncated importance sampling weights. */
export function tisWeights(oldLogprob: number[][], rolloutLogprob: number[][], cap: number): number[][] {
  return oldLogprob.map((row, i) => row.map((lp, t) => Math.min(Math.exp(lp - rolloutLogprob[i]![t]!), cap)));
}

/** Clipped value loss (VERL `compute_value_loss`), aggregated with the given weights. */
export function valueLoss(
  values: tf.Tensor2D,
  oldValues: tf.Tensor2D,
  returns: tf.Tensor2D,
  weights: tf.Tensor2D,
  clip: number,
): tf.Scalar {
  return tf.tidy(() => {
    const clipped = tf.add(oldValues, tf.clipByValue(tf.sub(values, oldValues), -clip, clip));
    const l1 = tf.square(tf.sub(values, returns));
    const l2 = tf.square(tf.sub(clipped, returns));
    return tf.mul(0.5, weightedSum(tf.maximum(l1, l2), weights)) as tf.Scalar;
  });
}
