import { InvalidArgumentError } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import {
  type ActorMetrics,
  type ActorUpdateOptions,
  actorUpdatePlan,
  computeLogprobs,
  type MicroResult,
  microBatchOptions,
  type RowLogprobs,
  type RowTensors,
  type TrainablePolicy,
  updateActor,
} from "../ppo/actor.js";
import type { AdamW } from "../ppo/optim.js";
import { promptMicroBatches } from "../ppo/prompt-micro-batches.js";
import type { TrainRow } from "../ppo/triplet-rows.js";
import type { SftRows } from "../sft/micro-batch.js";
import type { PolicyWorkers } from "./pool.js";
import type { GradsMessage } from "./protocol.js";

/**
 * Data-parallel gradients: micro-batches are computed on the workers (each takes the next one when free),
 * their gradients come back in micro-batch order and are summed in that order in the main thread, which
 * applies the optimizer and broadcasts the new weights — the same split and summation as in one thread.
 */

/** Gradient arrays from a worker as tensors shaped like the pool model's trainable variables. */
function* asTensors(pool: PolicyWorkers, messages: readonly GradsMessage[]): Generator<MicroResult> {
  const vars = pool.model.trainableVariables;
  for (const m of messages) {
    yield { grads: m.grads.map((g, k) => tf.tensor(g, (vars[k] as tf.Variable).shape)), stats: m.stats };
  }
}

/** `updateActor` with the micro-batch gradients computed on the workers (see `actorUpdatePlan`). */
export async function updateActorOnWorkers(
  pool: PolicyWorkers,
  optimizer: AdamW,
  rows: readonly TrainRow[],
  inputs: readonly RowTensors[],
  o: ActorUpdateOptions,
): Promise<ActorMetrics> {
  const options = microBatchOptions(o);
  const plan = actorUpdatePlan(optimizer, rows, inputs, o);
  let next = plan.next();
  while (!next.done) {
    // The workers compute with the weights of the model of record (changed by the previous step).
    await pool.syncWeights();
    const results = await pool.map(next.value, (batch, w) =>
      pool.call(w, { op: "actorGrads", batch, options }),
    );
    next = plan.next(asTensors(pool, results));
  }
  await pool.syncWeights();
  return next.value;
}

/**
 * The actor update on `workers` when given (their model must be `policy`), else in this thread: what
 * `ppoUpdate` calls. With workers, micro-batches are at most `miniBatchRows / workers` rows so that each
 * worker gets one (the same update up to float summation order: gradient accumulation is exact in math).
 */
export function runActorUpdate(
  models: { policy: TrainablePolicy; optimizer: AdamW; workers?: PolicyWorkers | null },
  rows: readonly TrainRow[],
  inputs: readonly RowTensors[],
  o: ActorUpdateOptions,
): Promise<ActorMetrics> {
  const { policy, optimizer, workers } = models;
  if (!workers) return Promise.resolve(updateActor(policy, optimizer, rows, inputs, o));
  if (workers.model !== policy) {
    return Promise.reject(
      new InvalidArgumentError("workers", "the worker pool must hold the policy being trained"),
    );
  }
  // Every worker needs a micro-batch of each mini-batch to be busy: split finer when there are fewer.
  const perWorker = Math.ceil(o.miniBatchRows / workers.size);
  return updateActorOnWorkers(workers, optimizer, rows, inputs, {
    ...o,
    microBatchRows: Math.min(o.microBatchRows, perWorker),
  });
}

/**
 * `computeLogprobs` of the policy (the old log-probs pass) on `workers` when given — the same
 * micro-batches (`promptMicroBatches`), one per task, results put back in row order, so the values are the
 * serial ones — else in this thread.
 */
export async function policyLogprobs(
  models: { policy: TrainablePolicy; workers?: PolicyWorkers | null },
  rows: readonly TrainRow[],
  microBatchRows: number,
  padId: number,
  temperature = 1,
): Promise<RowLogprobs> {
  const { policy, workers } = models;
  if (!workers) return computeLogprobs(policy, rows, microBatchRows, padId, temperature);
  await workers.syncWeights();
  const groups = promptMicroBatches(rows, microBatchRows);
  const results = await workers.map(groups, (group, w) =>
    workers.call(w, {
      op: "logprobs",
      rows: group.map((k) => rows[k]!),
      microBatchRows: group.length,
      padId,
      temperature,
    }),
  );
  const out: RowLogprobs = { logprobs: [], entropy: [], rawLogprobs: [] };
  groups.forEach((group, g) => {
    group.forEach((k, i) => {
      out.logprobs[k] = results[g]!.logprobs[i]!;
      out.entropy[k] = results[g]!.entropy[i]!;
      out.rawLogprobs[k] = results[g]!.rawLogprobs[i]!;
    });
  });
  return out;
}

/** Gradients and loss shares of SFT micro-batches (see `sftMicroGrads`), computed on the workers. */
export async function sftGradsOnWorkers(
  pool: PolicyWorkers,
  parts: readonly SftRows[],
  denom: number,
): Promise<Iterable<{ grads: tf.Tensor[]; loss: number }>> {
  const results = await pool.map(parts, (rows, w) =>
    pool.call(w, { op: "sftGrads", batch: { ids: rows.ids, mask: rows.mask, denom } }),
  );
  return (function* () {
    for (const r of asTensors(pool, results)) yield { grads: r.grads, loss: r.stats[0] as number };
  })();
}
