import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";
import { PretrainedModel } from "./pretrained-model.js";

/**
 * Will a training micro-batch fit in memory? On the WASM backend every tensor lives in one 32-bit
 * WebAssembly heap that grows to at most 4 GiB (tfjs-backend-wasm 4.22; measured: allocations abort
 * after 4,032 MiB), and running past it aborts the module ("memory access out of bounds" in a later
 * call) with no way to recover. So a trainer checks its micro-batch before the first step: the step's
 * peak is estimated from the model's shape (calibrated against measured `tf.profile` peaks) and added
 * to what is allocated now; a micro-batch the caller did not fix is shrunk until it fits, and one that
 * cannot fit fails at once with an error naming the option to change.
 */

/** The WASM heap's hard ceiling (65,536 pages of 64 KiB). */
export const WASM_HEAP_BYTES = 4 * 2 ** 30;
/** Share of the heap a plan may use: the allocator fragments, and kernels take workspace beyond their outputs. */
export const WASM_HEAP_USABLE_SHARE = 0.75;

const MEMORY_ERROR = Symbol.for("agl.TrainingMemoryError");

/** A training configuration whose micro-batch cannot fit in the backend's memory. */
export class TrainingMemoryError extends Error {
  readonly [MEMORY_ERROR] = true;
  /** The option to lower (e.g. `microBatchSize`, `actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu`). */
  readonly option: string;
  readonly neededBytes: number;
  readonly availableBytes: number;

  constructor(option: string, neededBytes: number, availableBytes: number, message: string) {
    super(message);
    this.name = "TrainingMemoryError";
    this.option = option;
    this.neededBytes = neededBytes;
    this.availableBytes = availableBytes;
  }

  static isInstance(error: unknown): error is TrainingMemoryError {
    return (
      typeof error === "object" && error !== null && (error as Record<symbol, unknown>)[MEMORY_ERROR] === true
    );
  }
}

/**
 * Bytes a training step of `rows` sequences of `seqLength` tokens adds on top of what is allocated
 * before it (weights, and Adam moments once created), for a Hugging Face model on tfjs:
 * - gradients, their clipped copies and Adam's temporaries: ~8 copies of the trainable weights;
 * - a trainable tied head: its transpose, the transposed gradient and the sum with the embedding gradient;
 * - the decoder's taped intermediates: ~3x the per-layer tensors (norms, q/k/v and their rotations, the
 *   attention output, gate/up/activation, residuals) and the per-head `T x T` scores and probabilities;
 * - the chunked head (see chunked-head.ts): ~10 temporaries of one chunk.
 * Calibrated on measured peaks (a 4.9M-parameter Qwen3 with a 151,936-token vocabulary: 317 MiB at 1 x 128,
 * 843 MiB at 8 x 512; the estimate is 374 and 833).
 */
export function trainingStepBytes(
  model: PretrainedModel,
  rows: number,
  seqLength: number,
  optimizerSlots = 2,
): number {
  const a = model.arch;
  const f = 4;
  const trainable = model.trainableVariables.reduce((n, v) => n + v.size, 0);
  const N = rows * seqLength;
  const q = a.numHeads * a.headDim;
  const kv = a.numKvHeads * a.headDim;
  const perTokenLayer = 4 * a.hiddenSize + 2 * (q + 2 * kv) + q + 3 * a.intermediateSize;
  const scores = 2 * rows * a.numHeads * seqLength * seqLength;
  const decoder = 3 * a.numLayers * (N * perTokenLayer + scores) * f;
  const head = model.variable("model.embed_tokens.weight");
  const tiedTrainable = a.tieWordEmbeddings && head.trainable ? 3 * head.size * f : 0;
  const chunk = 10 * Math.min(N * a.vocabSize, model.headChunkElements) * f + 3 * N * a.hiddenSize * f;
  // Adam's moments are created on the first step: count them unless the optimizer already holds them.
  const moments = optimizerSlots * trainable * f;
  return 8 * trainable * f + tiedTrainable + decoder + chunk + moments;
}

export interface MicroBatchFit {
  /** Rows per micro-batch to use (the requested number, or fewer when it was not fixed by the caller). */
  rows: number;
  /** Estimated peak of one step at `rows`, and the bytes left for it. */
  neededBytes: number;
  availableBytes: number;
}

export interface FitOptions {
  /** Rows per micro-batch wanted. */
  rows: number;
  /** Longest sequence a micro-batch may hold. */
  seqLength: number;
  /** The option that sets `rows`; when `fixed`, it is not shrunk but reported. */
  option: string;
  /** The caller set `rows` explicitly: fail instead of shrinking. */
  fixed: boolean;
  /** What sets the sequence length, named when even one row cannot fit (default: the context length). */
  lengthOption?: string;
  /** Adam moments still to be created (default 2), or 0 when the optimizer already holds them. */
  optimizerSlots?: number;
  /** Heap ceiling (default `WASM_HEAP_BYTES`); tests pass a small one. */
  heapBytes?: number;
  /** Force the check on any backend (default: only on `wasm`, the backend with a hard ceiling). */
  force?: boolean;
}

const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;

/**
 * The micro-batch a training run can use on this backend, checked before its first step. Returns the
 * requested rows when they fit (or when the check does not apply: not a Hugging Face model, or a backend
 * without the WASM ceiling); the largest smaller number that fits when the rows were not fixed; and throws
 * `TrainingMemoryError` naming `option` (or the sequence length, when even one row is too much) otherwise.
 */
export function fitMicroBatch(model: CausalLM, o: FitOptions): MicroBatchFit {
  const ceiling = o.heapBytes ?? WASM_HEAP_BYTES;
  if (!(model instanceof PretrainedModel) || (!o.force && tf.getBackend() !== "wasm")) {
    return { rows: o.rows, neededBytes: 0, availableBytes: Number.POSITIVE_INFINITY };
  }
  const available = ceiling * WASM_HEAP_USABLE_SHARE - tf.memory().numBytes;
  const need = (rows: number) => trainingStepBytes(model, rows, o.seqLength, o.optimizerSlots ?? 2);
  if (need(o.rows) <= available)
    return { rows: o.rows, neededBytes: need(o.rows), availableBytes: available };
  let rows = o.rows;
  while (rows > 1 && need(rows) > available) rows = Math.max(1, Math.floor(rows / 2));
  while (rows < o.rows && need(rows + 1) <= available) rows++;
  const fits = need(rows) <= available;
  const where = `the WASM heap (${mib(ceiling)} ceiling, ${mib(Math.max(0, available))} free for training)`;
  if (fits && !o.fixed) return { rows, neededBytes: need(rows), availableBytes: available };
  if (fits) {
    throw new TrainingMemoryError(
      o.option,
      need(o.rows),
      available,
      `A training micro-batch of ${o.rows} rows x ${o.seqLength} tokens needs about ${mib(need(o.rows))}, more than ${where}: set ${o.option} to ${rows} or less.`,
    );
  }
  throw new TrainingMemoryError(
    o.lengthOption ?? "contextLength",
    need(1),
    available,
    `Even one sequence of ${o.seqLength} tokens needs about ${mib(need(1))} to train, more than ${where}: lower ${o.lengthOption ?? "the context length"}, train LoRA adapters instead of all weights, or use a backend without this ceiling (tfjs-node).`,
  );
}
