import type { GenerateParams, GenerateResult, TokenEvent } from "../generate/request.js";
import type { MicroBatch, MicroBatchOptions, RowLogprobs } from "../ppo/actor.js";
import type { TrainRow } from "../ppo/triplet-rows.js";
import type { HfTokenizerFiles } from "../tokenizer/hf-tokenizer.js";
import type { TokenizerConfig } from "../tokenizer/tokenizer.js";
import type { ModelSpec } from "./replica.js";

/** The messages between the pool (main thread) and a policy worker. Everything here is structured-cloneable. */

/** Named weights, as `Float32Array`s (the values of the model's variables with these names). */
export interface WeightsMessage {
  names: string[];
  values: Float32Array[];
}

export type TokenizerSpec =
  | { kind: "char"; config: TokenizerConfig }
  | { kind: "hf"; files: HfTokenizerFiles };

/** What a worker is started with (`workerData`). */
export interface WorkerInit {
  /** The backend name for `selectBackend` (the main thread's). */
  backend: string;
  model: ModelSpec;
  tokenizer: TokenizerSpec;
  maxBatchSize: number | undefined;
}

/** One generation request on the wire: the params, the prompt, whether to stream token events back. */
export interface WireGenerateRequest extends GenerateParams {
  promptIds: number[];
  stream: boolean;
  /** The request's signal had already fired when it was dispatched. */
  aborted: boolean;
}

/** A micro-batch of SFT rows (padded to their own longest row) and the batch's loss denominator. */
export interface SftMicroBatch {
  ids: number[][];
  mask: number[][];
  /** Number of trained (assistant) target tokens in the whole batch. */
  denom: number;
}

/** Gradients in trainable-variable order plus scalars (the loss share / the actor's metric sums). */
export interface GradsMessage {
  grads: Float32Array[];
  stats: number[];
}

export type WorkerTask =
  | { op: "setWeights"; weights: WeightsMessage }
  | { op: "sftGrads"; batch: SftMicroBatch }
  | { op: "actorGrads"; batch: MicroBatch; options: MicroBatchOptions }
  | { op: "generate"; requests: WireGenerateRequest[] }
  | { op: "logprobs"; rows: TrainRow[]; microBatchRows: number; padId: number; temperature: number };

export interface TaskResults {
  setWeights: null;
  sftGrads: GradsMessage;
  actorGrads: GradsMessage;
  generate: GenerateResult[];
  logprobs: RowLogprobs;
}

export type ToWorker =
  | { type: "task"; id: number; task: WorkerTask }
  | { type: "abort"; id: number; index: number };

export type FromWorker =
  | { type: "ready" }
  | { type: "result"; id: number; result: unknown }
  | { type: "error"; id: number; message: string; stack?: string }
  | { type: "token"; id: number; index: number; event: TokenEvent };
