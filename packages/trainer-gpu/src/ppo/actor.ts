import * as tf from "@tensorflow/tfjs-core";
import { type PackedBatch, packBatch, toPacked } from "./batch.js";
import type { KlEstimator, LossAggMode } from "./config.js";
import {
  aggregationWeights,
  detach,
  klPenalty,
  policyLoss,
  tokenLogprobsAndEntropy,
  weightedSum,
} from "./loss.js";
import { type AdamW, addGrads, clipByGlobalNorm } from "./optim.js";
import { promptMicroBatches } from "./prompt-micro-batches.js";
import type { SeededRandom } from "./rng.js";
import type { TrainRow } from "./triplet-rows.js";

/** What the trainer needs from a policy: causal logits and its trainable variables. */
export interface TrainablePolicy {
  /** Logits `[B, L, V]` for token ids `[B, L]` (int32), causal. */
  logits(ids: tf.Tensor2D): tf.Tensor3D;
  readonly trainableVariables: readonly tf.Variable[];
  /**
   * Optional fast path: log-probs and entropies of `ids[:, 1:]` at `temperature` (with `raw`, also the
   * log-probs at temperature 1) computed without materialising the `[B, L, V]` logits. Hugging Face
   * models provide it; with a large vocabulary it is what keeps a micro-batch within memory.
   */
  tokenScores?(
    ids: tf.Tensor2D,
    options: { temperature?: number; raw?: boolean },
  ): { logProbs: tf.Tensor2D; entropy: tf.Tensor2D; raw?: tf.Tensor2D };
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/**
 * The temperature the policy's log-probs are taken at. The ratio must compare the distribution the
 * rollouts were sampled from, i.e. logits / rollout temperature (VERL divides the logits the same way for
 * old, reference and current log-probs). Greedy rollouts (temperature 0) sample from no distribution, so
 * they are scored at temperature 1 rather than dividing by zero.
 */
export function scoringTemperature(rolloutTemperature: number): number {
  return rolloutTemperature > 0 ? rolloutTemperature : 1;
}

interface Forwarded {
  logprobs: tf.Tensor2D;
  entropy: tf.Tensor2D;
  /** Log-probs at temperature 1 (only when asked for and the temperature is not 1). */
  raw: tf.Tensor2D | undefined;
}

/** Forward the packed micro-batch and return log-probs and entropies at the target positions, taken
 * at `temperature`. */
function forward(
  policy: TrainablePolicy,
  packed: PackedBatch,
  temperature: number,
  withRaw = false,
): Forwarded {
  return tf.tidy(() => {
    const ids = tf.tensor2d(packed.ids, [packed.batchSize, packed.length], "int32");
    if (policy.tokenScores) {
      const s = policy.tokenScores(ids, { temperature, raw: withRaw && temperature !== 1 });
      return { logprobs: s.logProbs, entropy: s.entropy, raw: temperature === 1 ? undefined : s.raw };
    }
    const logits = policy.logits(ids);
    const [B, L, V] = logits.shape;
    const shifted = tf.slice(logits, [0, 0, 0], [B, L - 1, V]) as tf.Tensor3D;
    const targets = tf.tensor2d(packed.targets, [B, L - 1], "int32");
    if (temperature === 1) return { ...tokenLogprobsAndEntropy(shifted, targets), raw: undefined };
    const scaled = tokenLogprobsAndEntropy(tf.div(shifted, temperature) as tf.Tensor3D, targets);
    const raw = withRaw ? tokenLogprobsAndEntropy(shifted, targets).logprobs : undefined;
    return { ...scaled, raw };
  });
}

/** Per-response-token values of each row (see `computeLogprobs`). */
export interface RowLogprobs {
  logprobs: number[][];
  entropy: number[][];
  rawLogprobs: number[][];
}

/**
 * Per-response-token log-probs (and entropies) of `rows` under `policy` at `temperature`, no gradient.
 * `rawLogprobs` are the same at temperature 1 — the scale of the rollout log-probs the proxy records
 * (vLLM's raw_logprobs), which truncated importance sampling compares against.
 */
export function computeLogprobs(
  policy: TrainablePolicy,
  rows: readonly TrainRow[],
  microBatchRows: number,
  padId: number,
  temperature = 1,
): RowLogprobs {
  const logprobs: number[][] = [];
  const entropy: number[][] = [];
  const rawLogprobs: number[][] = [];
  for (const group of promptMicroBatches(rows, microBatchRows)) {
    const packed = packBatch(
      group.map((k) => rows[k]!),
      padId,
    );
    const out = forward(policy, packed, temperature, true);
    const lp = out.logprobs.arraySync();
    const ent = out.entropy.arraySync();
    const raw = out.raw ? out.raw.arraySync() : lp;
    for (const t of [out.logprobs, out.entropy, out.raw]) t?.dispose();
    group.forEach((k, i) => {
      const s = packed.responseStart[i]!;
      const n = rows[k]!.responseIds.length;
      logprobs[k] = lp[i]!.slice(s, s + n);
      entropy[k] = ent[i]!.slice(s, s + n);
      rawLogprobs[k] = raw[i]!.slice(s, s + n);
    });
  }
  return { logprobs, entropy, rawLogprobs };
}

/** Per-response-token training inputs for one row. */
export interface RowTensors {
  advantages: number[];
  /** Log-probs of the policy that collected the data (recomputed), or null to use the current
   * log-probs detached (exactly on-policy: a single update per batch). */
  oldLogprobs: number[] | null;
  refLogprobs: number[] | null;
  tisWeights: number[] | null;
}

export interface ActorUpdateOptions {
  miniBatchRows: number;
  microBatchRows: number;
  epochs: number;
  shuffle: boolean;
  rng: SeededRandom;
  padId: number;
  clipLow: number;
  clipHigh: number;
  clipC: number;
  aggMode: LossAggMode;
  /** Divisor of `seq-mean-token-sum-norm` (default: the longest row). */
  lossScaleFactor?: number;
  /** Logits are divided by this (the rollout temperature, see `scoringTemperature`); default 1. */
  temperature?: number;
  entropyCoeff: number;
  useKlLoss: boolean;
  klLossCoef: number;
  klLossType: KlEstimator;
  gradClip: number;
  /** Learning rate for the given 1-based optimizer step. */
  lr: (step: number) => number;
}

export interface ActorMetrics {
  "actor/pg_loss": number;
  "actor/pg_clipfrac": number;
  "actor/pg_clipfrac_lower": number;
  "actor/ppo_kl": number;
  "actor/entropy": number;
  "actor/kl_loss": number;
  "actor/grad_norm": number;
  "actor/lr": number;
  "actor/n_updates": number;
}

/** One micro-batch of a mini-batch: its rows, their inputs and aggregation weights. Plain data, so a
 * worker thread can compute its gradient (`microBatchGrads`). */
export interface MicroBatch {
  rows: TrainRow[];
  inputs: RowTensors[];
  /** Loss aggregation weights per response token (over the whole mini-batch). */
  weights: number[][];
  /** Token-mean weights of the logged metrics. */
  metricWeights: number[][];
}

/** What a micro-batch gradient depends on besides its data (no functions: it crosses threads). */
export type MicroBatchOptions = Pick<
  ActorUpdateOptions,
  | "padId"
  | "clipLow"
  | "clipHigh"
  | "clipC"
  | "temperature"
  | "entropyCoeff"
  | "useKlLoss"
  | "klLossCoef"
  | "klLossType"
>;

/** The micro-batch's gradients (same order as the policy's trainable variables) and weighted metric sums
 * `[pg_loss, clipfrac, clipfrac_lower, ppo_kl, entropy, kl_loss]`. */
export interface MicroResult {
  grads: tf.Tensor[];
  stats: number[];
}

export function microBatchOptions(o: MicroBatchOptions): MicroBatchOptions {
  return {
    padId: o.padId,
    clipLow: o.clipLow,
    clipHigh: o.clipHigh,
    clipC: o.clipC,
    temperature: o.temperature,
    entropyCoeff: o.entropyCoeff,
    useKlLoss: o.useKlLoss,
    klLossCoef: o.klLossCoef,
    klLossType: o.klLossType,
  };
}

/** Gradient of one micro-batch's share of the mini-batch loss (the caller owns the returned tensors). */
export function microBatchGrads(policy: TrainablePolicy, mb: MicroBatch, o: MicroBatchOptions): MicroResult {
  const vars = [...policy.trainableVariables];
  const mRows = mb.rows;
  const packed = packBatch(mRows, o.padId);
  const pack = (vals: (number[] | null)[]) =>
    tf.tensor2d(
      toPacked(
        packed,
        vals.map((v, k) => v ?? new Array(mRows[k]!.responseIds.length).fill(0)),
      ),
      [packed.batchSize, packed.length - 1],
    );
  const stats: tf.Scalar[] = [];
  const { grads, value } = tf.tidy(() => {
    const adv = pack(mb.inputs.map((x) => x.advantages));
    const w = pack(mb.weights);
    const mw = pack(mb.metricWeights);
    const oldGiven = mb.inputs.every((x) => x.oldLogprobs != null);
    const oldT = oldGiven ? pack(mb.inputs.map((x) => x.oldLogprobs)) : null;
    const tisT = mb.inputs.every((x) => x.tisWeights != null)
      ? pack(mb.inputs.map((x) => x.tisWeights))
      : null;
    const refT = o.useKlLoss ? pack(mb.inputs.map((x) => x.refLogprobs)) : null;
    return tf.variableGrads(() => {
      const { logprobs, entropy } = forward(policy, packed, o.temperature ?? 1);
      const out = policyLoss({
        logprob: logprobs,
        oldLogprob: oldT ?? detach(logprobs),
        advantages: adv,
        weights: w,
        metricWeights: mw,
        clipLow: o.clipLow,
        clipHigh: o.clipHigh,
        clipC: o.clipC,
        tisWeights: tisT,
      });
      const entLoss = weightedSum(entropy, w);
      let loss = tf.sub(out.loss, tf.mul(entLoss, o.entropyCoeff)) as tf.Scalar;
      let klLoss = tf.scalar(0);
      if (refT) {
        klLoss = weightedSum(klPenalty(logprobs, refT, o.klLossType), w);
        loss = tf.add(loss, tf.mul(klLoss, o.klLossCoef)) as tf.Scalar;
      }
      const entMetric = weightedSum(entropy, mw);
      for (const t of [out.loss, out.clipfrac, out.clipfracLower, out.ppoKl, entMetric, klLoss]) {
        stats.push(tf.keep(t));
      }
      return loss;
    }, vars);
  });
  value.dispose();
  const values = stats.map((t) => t.dataSync()[0]!);
  for (const t of stats) t.dispose();
  return { grads: vars.map((v) => grads[v.name]!), stats: values };
}

/**
 * The actor update as a plan: yields the micro-batches of each mini-batch and takes back their results
 * (in micro-batch order; an iterable, so a serial driver can compute them one at a time), sums the
 * gradients in that order and applies one clipped optimizer step per mini-batch. `updateActor` drives it
 * in this thread; `updateActorOnWorkers` on worker threads — same split and summation order, same result.
 */
export function* actorUpdatePlan(
  optimizer: AdamW,
  rows: readonly TrainRow[],
  inputs: readonly RowTensors[],
  o: ActorUpdateOptions,
): Generator<MicroBatch[], ActorMetrics, Iterable<MicroResult>> {
  const sums = { pg: 0, clip: 0, clipLower: 0, kl: 0, ent: 0, klLoss: 0, norm: 0, lr: 0 };
  let updates = 0;
  const order = rows.map((_, i) => i);
  for (let epoch = 0; epoch < o.epochs; epoch++) {
    if (o.shuffle && epoch > 0) o.rng.shuffle(order);
    for (const mini of chunks(order, o.miniBatchRows)) {
      const miniRows = mini.map((i) => rows[i]!);
      const masks = miniRows.map((r) => r.responseMask);
      const weights = aggregationWeights(
        masks,
        o.aggMode,
        miniRows.map((r) => r.rolloutId),
        o.lossScaleFactor,
      );
      const metricWeights = aggregationWeights(masks, "token-mean");
      // Rows of one prompt stay together so a prefix-sharing model runs the prompt once (same math).
      const micro = promptMicroBatches(miniRows, o.microBatchRows).map(
        (part): MicroBatch => ({
          rows: part.map((j) => miniRows[j]!),
          inputs: part.map((j) => inputs[mini[j]!]!),
          weights: part.map((j) => weights[j]!),
          metricWeights: part.map((j) => metricWeights[j]!),
        }),
      );
      let acc: tf.Tensor[] | null = null;
      for (const { grads: list, stats } of yield micro) {
        const [pg, clip, clipLower, kl, ent, klLoss] = stats;
        // Micro-batch sums of weighted terms add up to the mini-batch value; metric weights too.
        sums.pg += pg!;
        sums.clip += clip!;
        sums.clipLower += clipLower!;
        sums.kl += kl!;
        sums.ent += ent!;
        sums.klLoss += klLoss!;
        acc = addGrads(acc, list);
      }
      if (acc) {
        const { grads, norm } = clipByGlobalNorm(acc, o.gradClip);
        const lr = o.lr(optimizer.step + 1);
        optimizer.apply(grads, lr);
        for (const g of new Set([...acc, ...grads])) g.dispose();
        sums.norm += norm;
        sums.lr = lr;
        updates += 1;
      }
    }
  }
  const u = Math.max(1, updates);
  return {
    "actor/pg_loss": sums.pg / u,
    "actor/pg_clipfrac": sums.clip / u,
    "actor/pg_clipfrac_lower": sums.clipLower / u,
    "actor/ppo_kl": sums.kl / u,
    "actor/entropy": sums.ent / u,
    "actor/kl_loss": sums.klLoss / u,
    "actor/grad_norm": sums.norm / u,
    "actor/lr": sums.lr,
    "actor/n_updates": updates,
  };
}

/**
 * PPO actor update: `epochs` passes over the rows in mini-batches of `miniBatchRows`, each split into
 * micro-batches whose gradients are summed before one clipped optimizer step.
 */
export function updateActor(
  policy: TrainablePolicy,
  optimizer: AdamW,
  rows: readonly TrainRow[],
  inputs: readonly RowTensors[],
  o: ActorUpdateOptions,
): ActorMetrics {
  const plan = actorUpdatePlan(optimizer, rows, inputs, o);
  const micro = microBatchOptions(o);
  let next = plan.next();
  while (!next.done) {
    const parts = next.value;
    next = plan.next(
      (function* () {
        for (const mb of parts) yield microBatchGrads(policy, mb, micro);
      })(),
    );
  }
  return next.value;
}
