import * as tf from "@tensorflow/tfjs";
import { batchInputs, toRows } from "../model/batch-inputs.js";
import type { IdsInput, MaskInput } from "../model/causal-lm.js";
import { headLogProbs } from "./chunked-head.js";
import type { PretrainedModel } from "./pretrained-model.js";

/**
 * The scoring path of `PretrainedModel`: log-probs (and entropies) of each row's next tokens through the
 * chunked head (see chunked-head.ts), so the `[B, T, V]` logits are never materialised. What sft(),
 * trainStep() and PPO train and score through.
 */

/** Per-token scores of `ids[:, 1:]`, `[B, T-1]` each. */
export type TokenScores = {
  logProbs: tf.Tensor2D;
  entropy?: tf.Tensor2D;
  /** Log-probs at temperature 1 (the same tensor as `logProbs` when the temperature is 1). */
  raw?: tf.Tensor2D;
};

export interface ScoreOptions {
  temperature: number;
  entropy: boolean;
  raw?: boolean;
  adapters: boolean;
}

/** Next-token targets `ids[:, 1:]` of rows of length `T`, flattened `[B*(T-1)]`. */
export function nextTokenTargets(rows: readonly (readonly number[])[], T: number): Int32Array {
  const targets = new Int32Array(rows.length * (T - 1));
  rows.forEach((r, b) => {
    targets.set(r.slice(1), b * (T - 1));
  });
  return targets;
}

/**
 * Scores of hidden rows `hs [N, d]` against `targets [N]` as `[N]`-long columns: log-probs at
 * `temperature`, entropies (with `entropy`) and log-probs at temperature 1 (with `raw`). Call inside a tidy.
 */
export function headScores(
  model: PretrainedModel,
  hs: tf.Tensor2D,
  targets: Int32Array,
  options: Omit<ScoreOptions, "adapters">,
): { logProbs: tf.Tensor1D; entropy?: tf.Tensor1D; raw?: tf.Tensor1D } {
  const N = hs.shape[0];
  const w = model.headWeight();
  const maxElements = model.headChunkElements;
  const { temperature, entropy } = options;
  const out = headLogProbs(hs, w, targets, { temperature, entropy, maxElements });
  const column = (t: tf.Tensor, i: number) => tf.reshape(tf.slice(t, [0, i], [N, 1]), [N]) as tf.Tensor1D;
  const logProbs = column(out, 0);
  const scores: { logProbs: tf.Tensor1D; entropy?: tf.Tensor1D; raw?: tf.Tensor1D } = { logProbs };
  if (entropy) scores.entropy = column(out, 1);
  if (options.raw)
    scores.raw = temperature === 1 ? logProbs : column(headLogProbs(hs, w, targets, { maxElements }), 0);
  return scores;
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
  adapters: boolean,
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
