import * as tf from "@tensorflow/tfjs";
import { commonPrefixLength } from "../model/batch-inputs.js";
import { headScores, type ScoreOptions, type TokenScores } from "./head-scores.js";
import type { PretrainedModel } from "./pretrained-model.js";

export { commonPrefixLength };

/**
 * Exact shared-prefix scoring. When every row of a batch starts with the same P tokens (the tool preamble
 * of chat-templated SFT rows, the prompt of a GRPO group), the prefix's hidden states and keys/values are
 * the same in every row: causal attention makes them independent of what follows. So the prefix runs once
 * (batch 1), and the rows' suffixes run against its keys/values repeated over the batch (positions offset
 * by P, causal within the suffix, full attention to the prefix). Gradients flow back through the repeat
 * (a sum over rows), so log-probs and every gradient equal the unshared forward's up to float rounding.
 * Right padding needs no mask: it comes last, so no real token attends to it.
 */

/** `x [1, ...]` repeated `B` times along axis 0; its gradient sums the rows' gradients (a ones-row matmul). */
function repeatRows<T extends tf.Tensor>(x: T, B: number): T {
  const op = tf.customGrad(((...args: Array<tf.Tensor | tf.GradSaveFunc>) => {
    const [a] = args as [tf.Tensor];
    const reps = a.shape.map((_, i) => (i === 0 ? B : 1));
    return {
      value: tf.tile(a, reps),
      gradFunc: (dy: tf.Tensor) => {
        const n = a.size;
        return [tf.reshape(tf.matMul(tf.ones([1, B]), tf.reshape(dy, [B, n])), a.shape)];
      },
    };
  }) as never) as unknown as (a: tf.Tensor) => tf.Tensor;
  return op(x) as T;
}

/**
 * Scores of `rows` (each `T` ids, all sharing their first `P`, `1 <= P < T`) computed with the prefix run
 * once; the same `[B, T-1]` tensors as `scoreTokens` without sharing. Call inside a tidy.
 */
export function sharedPrefixScores(
  model: PretrainedModel,
  rows: readonly (readonly number[])[],
  P: number,
  options: ScoreOptions,
): TokenScores {
  const B = rows.length;
  const T = rows[0]?.length ?? 0;
  const S = T - P;
  if (!(P >= 1 && S >= 1)) throw new Error(`sharedPrefixScores: prefix ${P} of rows of ${T} tokens`);
  const d = model.config.dModel;
  const prefix = Int32Array.from((rows[0] as readonly number[]).slice(0, P));
  const suffix = new Int32Array(B * S);
  const suffixPositions = new Int32Array(B * S);
  // Targets: the prefix's own next tokens once (positions 0..P-2), then per row positions P-1..T-2.
  const targets = new Int32Array(P - 1 + B * S);
  targets.set(prefix.subarray(1), 0);
  rows.forEach((r, b) => {
    suffix.set(r.slice(P), b * S);
    targets.set(r.slice(P), P - 1 + b * S);
    for (let t = 0; t < S; t++) suffixPositions[b * S + t] = P + t;
  });
  const { adapters } = options;
  const head = model.blocks(
    model.embed(prefix),
    1,
    P,
    Int32Array.from({ length: P }, (_, t) => t),
    model.causalMask(P),
    adapters,
  );
  const past = head.kv.map((e) => ({ k: repeatRows(e.k, B), v: repeatRows(e.v, B) }));
  // Suffix queries see every prefix key and the suffix causally: rows P..T-1 of the T x T causal mask.
  const bias = tf.slice(model.causalMask(T), [0, 0, P, 0], [1, 1, S, T]);
  const tail = model.blocks(model.embed(suffix), B, S, suffixPositions, bias, adapters, past);
  // The prefix's last state predicts each row's first suffix token; the suffix's last state predicts nothing.
  const last = repeatRows(tf.slice(head.h, [P - 1, 0], [1, d]), B);
  const perRow = tf.concat(
    [tf.reshape(last, [B, 1, d]), tf.slice(tf.reshape(tail.h, [B, S, d]), [0, 0, 0], [B, S - 1, d])],
    1,
  );
  const own = tf.reshape(perRow, [B * S, d]);
  const hs = P === 1 ? own : tf.concat([tf.slice(head.h, [0, 0], [P - 1, d]), own], 0);
  const s = headScores(model, hs as tf.Tensor2D, targets, options);
  // Back to `[B, T-1]`: the shared prefix part repeated over the rows, then each row's own part.
  const expand = (col: tf.Tensor1D): tf.Tensor2D => {
    const own = tf.reshape(tf.slice(col, [P - 1], [B * S]), [B, S]);
    if (P === 1) return own as tf.Tensor2D;
    const shared = repeatRows(tf.reshape(tf.slice(col, [0], [P - 1]), [1, P - 1]), B);
    return tf.concat([shared, own], 1) as tf.Tensor2D;
  };
  const scores: TokenScores = { logProbs: expand(s.logProbs) };
  if (s.entropy) scores.entropy = expand(s.entropy);
  if (s.raw) scores.raw = s.raw === s.logProbs ? scores.logProbs : expand(s.raw);
  return scores;
}
