import type * as tf from "@tensorflow/tfjs";

/**
 * What the generator, the server, sft() and PPO need from a policy. `PolicyModel` (the package's own
 * small transformer) and `PretrainedModel` (a loaded Hugging Face checkpoint) both implement it.
 */

export type IdsInput = tf.Tensor2D | readonly (readonly number[])[];
export type MaskInput = tf.Tensor2D | readonly (readonly number[])[];

/** Cached attention state of one layer: keys and values `[B,H,L,dh]` (`H` = key/value heads). */
export interface LayerKV {
  k: tf.Tensor4D;
  v: tf.Tensor4D;
}

/**
 * Per-row LoRA adapter selection of a batch (one entry per prompt / sequence): an adapter name, `null` for
 * the base weights alone, `undefined` for the model's default. Only models with `adapterNames` honour it.
 */
export type AdapterRows = ReadonlyArray<string | null | undefined>;

export interface CausalLMConfig {
  readonly vocabSize: number;
  /** Longest sequence the model accepts (prompt + generation). */
  readonly contextLength: number;
  /** Width of the final hidden states (value heads read them). */
  readonly dModel: number;
}

export interface CausalLM {
  readonly config: CausalLMConfig;
  /** The variables an optimizer updates (all weights, or only the LoRA adapters), in a fixed order. */
  readonly trainableVariables: tf.Variable[];
  readonly parameterCount: number;
  /** Parameters taking part in dense matmuls per token (for FLOP/MFU accounting). */
  readonly matmulParameterCount: number;
  readonly isDisposed: boolean;
  /** Next-token logits `[B,T,V]`; differentiable. */
  logits(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D;
  /** Final hidden states `[B,T,d]`. */
  hidden(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D;
  /** log p(ids[:,t+1] | ids[:,<=t]) `[B,T-1]`; differentiable. */
  tokenLogProbs(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options?: { temperature?: number },
  ): tf.Tensor2D;
  tokenLogProbsWithEntropy(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options?: { temperature?: number },
  ): { logProbs: tf.Tensor2D; entropy: tf.Tensor2D };
  prefill(ids: readonly number[]): { logits: Float32Array; cache: LayerKV[] };
  prefillMany(
    prompts: ReadonlyArray<readonly number[]>,
    adapters?: AdapterRows,
  ): { logits: Float32Array; cache: LayerKV[] };
  /**
   * Optional (prefix caching): `prefillMany` of prompts that all start with the tokens whose keys/values
   * `prefix` holds (`[1, H, L, dh]` per layer), running only the positions after them. The prefix must
   * have been computed with the same adapter selection.
   */
  prefillAfter?(
    prefix: readonly LayerKV[],
    prompts: ReadonlyArray<readonly number[]>,
    adapters?: AdapterRows,
  ): { logits: Float32Array; cache: LayerKV[] };
  decodeStep(
    tokens: readonly number[],
    positions: readonly number[],
    cache: LayerKV[],
    keyBias: tf.Tensor4D,
    adapters?: AdapterRows,
  ): { logits: Float32Array; cache: LayerKV[] };
  /**
   * The named LoRA adapters a row can select in `prefillMany`/`decodeStep` (multi-LoRA serving); absent
   * on models that run one set of weights, which ignore a selection.
   */
  readonly adapterNames?: readonly string[];
  /** An independent copy (e.g. a frozen reference policy). */
  clone(options?: { trainable?: boolean }): CausalLM;
  /**
   * The frozen policy KL is measured against: a non-trainable copy for full fine-tuning; for a LoRA
   * model, the same base weights with the adapters switched off (no second copy of the weights).
   */
  frozenReference(): CausalLM;
  /** Copy every weight value from a model of the same kind and shape. */
  setWeightsFrom(other: CausalLM): void;
  dispose(): void;
}
