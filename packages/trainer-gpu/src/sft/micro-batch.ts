import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";

/** A batch's rows: token ids and the assistant mask (1 = trained target). */
export interface SftRows {
  ids: number[][];
  mask: number[][];
}

/** Right-pad rows to their longest (padding is never a target and, being last, never attended to). */
export function padRows(rows: ReadonlyArray<{ ids: number[]; mask: number[] }>, pad = 0): SftRows {
  const T = Math.max(...rows.map((b) => b.ids.length));
  return {
    ids: rows.map((b) => [...b.ids, ...new Array<number>(T - b.ids.length).fill(pad)]),
    mask: rows.map((b) => [...b.mask, ...new Array<number>(T - b.mask.length).fill(0)]),
  };
}

/** Trained target tokens of the rows (the mask from position 1 on). */
export function targetCount(rows: ReadonlyArray<{ mask: number[] }>): number {
  return rows.reduce((a, r) => a + r.mask.slice(1).reduce((x, y) => x + y, 0), 0);
}

/**
 * Gradient of one micro-batch's share of the batch loss: its summed masked NLL divided by the whole
 * batch's target count `denom`, so the shares of all micro-batches add up to the batch's mean NLL.
 * Returns the gradients in `model.trainableVariables` order (caller disposes) and the loss share.
 */
export function sftMicroGrads(
  model: CausalLM,
  rows: SftRows,
  denom: number,
): { grads: tf.Tensor[]; loss: number } {
  const vars = model.trainableVariables;
  const { value, grads } = tf.variableGrads(
    () =>
      tf.tidy(() => {
        const lp = model.tokenLogProbs(rows.ids);
        const w = tf.tensor2d(
          rows.mask.map((r) => r.slice(1)),
          [rows.ids.length, (rows.ids[0]?.length ?? 1) - 1],
        );
        return tf.div(tf.neg(tf.sum(tf.mul(lp, w))), Math.max(denom, 1)) as tf.Scalar;
      }),
    vars,
  );
  const loss = value.dataSync()[0] as number;
  value.dispose();
  return { grads: vars.map((v) => grads[v.name] as tf.Tensor), loss };
}
