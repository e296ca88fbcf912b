import { InvalidArgumentError } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";
import { maskedNll } from "./sft.js";

/**
 * One optimiser step on raw token ids, for training loops of your own: the mean next-token cross-entropy
 * over the chosen target tokens (what transformers' causal-LM loss computes with `labels`), its gradient
 * on `model.trainableVariables` (all weights, or only the LoRA adapters), optional global-norm clipping,
 * then `optimizer.applyGradients`.
 */

export interface TrainStepOptions {
  /** Token id rows (ragged rows are right-padded with `padId`; padding is never a target). */
  inputIds: readonly (readonly number[])[];
  /**
   * Which tokens are targets, per position (1 = train on predicting this token from the ones before it;
   * position 0 has nothing before it and is ignored). Default: every token after the first.
   */
  mask?: readonly (readonly number[])[];
  /**
   * transformers-style labels instead of `mask`: the row of ids with `-100` where there is no loss. Labels
   * must equal the ids where they are not -100 (the model scores `inputIds[t]`; it does not take other targets).
   */
  labels?: readonly (readonly number[])[];
  /** Any tfjs optimizer (`tf.train.adam(1e-4)`, `tf.train.sgd(0.1)`, ...). */
  optimizer: tf.Optimizer;
  /** Clip the gradients' global L2 norm to this (default 0: no clipping). */
  maxGradNorm?: number;
  /** Fills ragged rows (default 0). */
  padId?: number;
}

export interface TrainStepResult {
  /** The loss before the update: mean negative log-likelihood per target token. */
  loss: number;
  /** Number of target tokens. */
  tokens: number;
  /** Global L2 norm of the gradients before clipping. */
  gradNorm: number;
}

export function trainStep(model: CausalLM, options: TrainStepOptions): TrainStepResult {
  const { ids, mask } = prepare(model, options);
  const tokens = mask.reduce((n, row) => n + row.slice(1).reduce((a, b) => a + b, 0), 0);
  if (tokens === 0) throw new InvalidArgumentError(options.labels ? "labels" : "mask", "no target tokens");
  const vars = model.trainableVariables;
  const { value, grads } = tf.variableGrads(() => maskedNll(model, ids, mask), vars);
  const loss = value.dataSync()[0] as number;
  const gradNorm = tf.tidy(() =>
    Math.sqrt(tf.addN(Object.values(grads).map((g) => tf.sum(tf.square(g)))).dataSync()[0] as number),
  );
  const max = options.maxGradNorm ?? 0;
  const scale = max > 0 && gradNorm > max ? max / (gradNorm + 1e-6) : 1;
  const applied = scale === 1 ? grads : tf.tidy(() => mapValues(grads, (g) => tf.mul(g, scale)));
  options.optimizer.applyGradients(applied);
  tf.dispose([value, ...Object.values(grads), ...(applied === grads ? [] : Object.values(applied))]);
  return { loss, tokens, gradNorm };
}

function mapValues(m: tf.NamedTensorMap, f: (t: tf.Tensor) => tf.Tensor): tf.NamedTensorMap {
  return Object.fromEntries(Object.entries(m).map(([k, t]) => [k, f(t)]));
}

/** Validate (errors name the field and position) and pad to rectangular ids and a 0/1 target mask. */
function prepare(model: CausalLM, o: TrainStepOptions): { ids: number[][]; mask: number[][] } {
  const V = model.config.vocabSize;
  const rows: readonly (readonly number[])[] = o.inputIds;
  if (!Array.isArray(o.inputIds) || rows.length === 0)
    throw new InvalidArgumentError("inputIds", "needs at least one row");
  if (o.mask && o.labels) throw new InvalidArgumentError("labels", "give mask or labels, not both");
  const T = Math.max(...rows.map((r) => r.length));
  if (T < 2) throw new InvalidArgumentError("inputIds", "rows need at least 2 tokens");
  if (T > model.config.contextLength) {
    throw new InvalidArgumentError(
      "inputIds",
      `rows of ${T} tokens exceed the context of ${model.config.contextLength}`,
    );
  }
  const pad = o.padId ?? 0;
  const ids: number[][] = [];
  const mask: number[][] = [];
  rows.forEach((row, i) => {
    row.forEach((id, t) => {
      if (!Number.isInteger(id) || id < 0 || id >= V)
        throw new InvalidArgumentError(`inputIds[${i}][${t}]`, `${id} is not a token id in [0, ${V})`);
    });
    const given = o.mask?.[i] ?? o.labels?.[i];
    const name = o.mask ? "mask" : "labels";
    if ((o.mask || o.labels) && (given === undefined || given.length !== row.length)) {
      throw new InvalidArgumentError(
        `${name}[${i}]`,
        `must have one entry per token of inputIds[${i}] (${row.length})`,
      );
    }
    const m = row.map((id, t) => {
      if (!given) return t > 0 ? 1 : 0;
      const v = given[t] as number;
      if (o.mask) {
        if (v !== 0 && v !== 1) throw new InvalidArgumentError(`mask[${i}][${t}]`, "must be 0 or 1");
        return v;
      }
      if (v === -100) return 0;
      if (v !== id) {
        throw new InvalidArgumentError(
          `labels[${i}][${t}]`,
          `is ${v}, but must be -100 or the token id ${id}`,
        );
      }
      return 1;
    });
    m[0] = 0;
    ids.push([...row, ...new Array<number>(T - row.length).fill(pad)]);
    mask.push([...m, ...new Array<number>(T - row.length).fill(0)]);
  });
  return { ids, mask };
}
