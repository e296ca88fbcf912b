import * as tf from "@tensorflow/tfjs";
import type { AdapterChoice } from "./adapter-rows.js";
import { headLogProbs } from "./chunked-head.js";
import type { PretrainedModel } from "./pretrained-model.js";

// The head end of the scoring path: hidden rows to target log-probs, entropies and raw log-probs.

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
  adapters: AdapterChoice;
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
