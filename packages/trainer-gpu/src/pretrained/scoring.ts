import * as tf from "@tensorflow/tfjs";
import { batchInputs, checkLength, toRows } from "../model/batch-inputs.js";
import type { IdsInput, MaskInput } from "../model/causal-lm.js";
import type { AdapterChoice } from "./adapter-rows.js";
import { headScores, type ScoreOptions, type TokenScores } from "./head-scores.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { commonPrefixLength, sharedPrefixScores } from "./shared-prefix.js";

export type { TokenScores };

/**
 * The scoring path of `PretrainedModel`: log-probs (and entropies) of each row's next tokens through the
 * chunked head (see chunked-head.ts), so the `[B, T, V]` logits are never materialised. What sft(),
 * trainStep() and PPO train and score through.
 */

/** Next-token targets `ids[:, 1:]` of rows of length `T`, flattened `[B*(T-1)]`. */
export function nextTokenTargets(rows: readonly (readonly number[])[], T: number): Int32Array {
  const targets = new Int32Array(rows.length * (T - 1));
  rows.forEach((r, b) => {
    targets.set(r.slice(1), b * (T - 1));
  });
  return targets;
}

/**
 * The prefix length to share for this batch, or 0 for the plain forward: sharing needs several rows of
 * one length without an attention mask (left padding shifts positions), one adapter setting for all rows,
 * and a common prefix of at least `model.sharedPrefixMinTokens` (two passes cost more than a few tokens).
 */
function sharedPrefixOf(
  model: PretrainedModel,
  rows: readonly (readonly number[])[],
  mask: MaskInput | undefined,
  adapters: ScoreOptions["adapters"],
): number {
  if (!model.sharePrefix || mask !== undefined || rows.length < 2 || typeof adapters !== "boolean") return 0;
  const T = rows[0]?.length ?? 0;
  if (rows.some((r) => r.length !== T)) return 0;
  const P = commonPrefixLength(rows);
  return P >= Math.max(1, model.sharedPrefixMinTokens) ? P : 0;
}

/** Log-probs of `ids[:, t+1]` (and entropies, and raw log-probs) of a batch, each `[B, T-1]`. */
export function scoreTokens(
  model: PretrainedModel,
  inputIds: IdsInput,
  mask: MaskInput | undefined,
  options: ScoreOptions,
): TokenScores {
  const rows = toRows(inputIds);
  const T = rows[0]?.length ?? 0;
  if (T < 2) throw new Error("tokenLogProbs needs sequences of at least 2 tokens");
  const P = sharedPrefixOf(model, rows, mask, options.adapters);
  if (P > 0) {
    checkLength(T, model.config.contextLength);
    return tf.tidy(() => sharedPrefixScores(model, rows, P, options));
  }
  const targets = nextTokenTargets(rows, T);
  return tf.tidy(() => {
    const { h, B } = model.forwardHidden(rows, mask, options.adapters);
    const d = model.config.dModel;
    const N = B * (T - 1);
    const hs = tf.reshape(tf.slice(tf.reshape(h, [B, T, d]), [0, 0, 0], [B, T - 1, d]), [
      N,
      d,
    ]) as tf.Tensor2D;
    const s = headScores(model, hs, targets, options);
    const shape = (t: tf.Tensor1D) => tf.reshape(t, [B, T - 1]) as tf.Tensor2D;
    const scores: TokenScores = { logProbs: shape(s.logProbs) };
    if (s.entropy) scores.entropy = shape(s.entropy);
    if (s.raw) scores.raw = s.raw === s.logProbs ? scores.logProbs : shape(s.raw);
    return scores;
  });
}

/** Final hidden states `[B*T,d]` of a batch (an attention mask gives padding-aware positions). */
export function batchHidden(
  model: PretrainedModel,
  inputIds: IdsInput,
  attentionMask: MaskInput | undefined,
  adapters: AdapterChoice,
) {
  const inp = batchInputs(inputIds, attentionMask, model.config.contextLength);
  const { B, T } = inp;
  let bias: tf.Tensor = model.causalMask(T);
  let positions = inp.positions;
  if (inp.keyBias) bias = tf.add(bias, tf.tensor4d(inp.keyBias, [B, 1, 1, T]));
  if (!positions) {
    positions = new Int32Array(B * T);
    for (let b = 0; b < B; b++) for (let t = 0; t < T; t++) positions[b * T + t] = t;
  }
  const { h } = model.blocks(model.embed(inp.flat), B, T, positions, bias, adapters);
  return { h, rows: inp.rows, B, T };
}
