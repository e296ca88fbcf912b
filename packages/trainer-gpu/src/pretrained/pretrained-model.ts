import * as tf from "@tensorflow/tfjs";
import { CausalMasks } from "../model/batch-inputs.js";
import type { AdapterRows, CausalLM, IdsInput, LayerKV, MaskInput } from "../model/causal-lm.js";
import { embedRows, mm } from "../model/ops.js";
import {
  type AdapterChoice,
  assignLora,
  cloneLora,
  DEFAULT_ADAPTER,
  type LoraState,
  loraSize,
} from "./adapter-rows.js";
import { BaseModelView } from "./base-view.js";
import { DEFAULT_HEAD_CHUNK_ELEMENTS } from "./chunked-head.js";
import { decoderBlocks, generationKernels } from "./decoder.js";
import { gatherRows } from "./gather-rows.js";
import { HeadWeight } from "./head-weight.js";
import type { ArchConfig } from "./hf-config.js";
import { decodeRows, prefillAfterRows, prefillRows } from "./incremental.js";
import { loraTrainables, peftNamedWeights } from "./lora-state.js";
import type { PretrainedModelConfig, PretrainedModelOptions } from "./model-options.js";
import { RotaryCache } from "./rope.js";
import type { FloatTensor } from "./safetensors.js";
import { batchHidden, scoreTokens, type TokenScores } from "./scoring.js";
import {
  fileLayoutInit,
  fileLayoutTensors,
  linearSites,
  matmulParameters,
  randomInit,
  weightSpecs,
} from "./weights.js";

/**
 * A Llama / Qwen2 / Qwen3 / Mistral decoder in tfjs, exactly as the reference implementations compute it:
 * RMSNorm, rotary embeddings (default / linear / llama3, partial or explicit head_dim), grouped-query
 * attention, SiLU-gated MLP, qwen2's q/k/v biases, qwen3's per-head q/k RMSNorm, tied or untied output
 * head. Implements `CausalLM`, so the generator, server, sft() and PPO use it like `PolicyModel`. LoRA
 * adapters live alongside the frozen base weights: the default one (`applyLora`) and any number of named
 * ones (`addLoraAdapter`) over the same single copy of the base; a forward selects them per row.
 */

export type { PretrainedModelConfig, PretrainedModelOptions } from "./model-options.js";
export type { TokenScores };

let nextInstance = 0;

export class PretrainedModel implements CausalLM {
  readonly arch: ArchConfig;
  readonly config: PretrainedModelConfig;
  readonly rawConfig: Record<string, unknown>;
  readonly sourceDir: string | undefined;
  readonly generationConfig: Record<string, unknown> | null;
  /** Unique prefix of this instance's tfjs variable names. */
  readonly scope: string;
  private readonly vars = new Map<string, tf.Variable>();
  /** Every LoRA adapter by name (`applyLora`'s is "default"); managed by lora.ts. */
  readonly adapters = new Map<string, LoraState>();
  private readonly rotary: RotaryCache;
  private readonly masks = new CausalMasks();
  private readonly headMatrix = new HeadWeight();
  private disposed = false;
  /**
   * Most logits the log-prob path materialises at once (see chunked-head.ts); lower it to cut peak memory
   * with a large vocabulary, at the cost of more, smaller head matmuls.
   */
  headChunkElements = DEFAULT_HEAD_CHUNK_ELEMENTS;
  /**
   * Run a prefix all rows of a scored batch share once (shared-prefix.ts): sft(), trainStep(), PPO passes.
   * Same results up to float rounding; `false` runs every row in full. Set before starting workers.
   */
  sharePrefix = true;
  /** Shortest common prefix worth sharing (default 16 tokens). */
  sharedPrefixMinTokens = 16;

  /** `value(name)` returns each weight in the in-memory layout (linear weights `[in, out]`). */
  constructor(
    arch: ArchConfig,
    value: (name: string, shape: number[]) => tf.Tensor,
    options: PretrainedModelOptions = {},
  ) {
    this.arch = arch;
    const cap = Math.min(arch.maxPositionEmbeddings, arch.slidingWindow ?? Number.POSITIVE_INFINITY);
    this.config = {
      vocabSize: arch.vocabSize,
      contextLength: Math.min(cap, options.contextLength ?? cap),
      dModel: arch.hiddenSize,
      nLayers: arch.numLayers,
    };
    this.rawConfig = options.rawConfig ?? {};
    this.sourceDir = options.sourceDir;
    this.generationConfig = options.generationConfig ?? null;
    this.scope = `agl_hf_${nextInstance++}`;
    this.rotary = new RotaryCache(arch.headDim, arch.rope, this.config.contextLength);
    for (const spec of weightSpecs(arch)) {
      const shape = spec.linear ? [spec.shape[1] as number, spec.shape[0] as number] : spec.shape;
      const v = value(spec.name, shape);
      this.vars.set(spec.name, tf.variable(v, true, `${this.scope}/${spec.name}`));
      v.dispose();
    }
  }

  /** Build from tensors in the file layout (linear weights `[out, in]`), e.g. read from safetensors. */
  static fromTensors(
    arch: ArchConfig,
    get: (name: string) => FloatTensor,
    options: PretrainedModelOptions = {},
  ): PretrainedModel {
    return new PretrainedModel(arch, fileLayoutInit(arch, get), options);
  }

  /** A randomly initialised model (normal(0, std) matrices, norms near 1, random biases). */
  static random(
    arch: ArchConfig,
    seed = 0,
    options: PretrainedModelOptions & { std?: number } = {},
  ): PretrainedModel {
    return new PretrainedModel(arch, randomInit(seed, options.std ?? 0.02), options);
  }

  /** The default LoRA adapter (`applyLora`'s); `null` without one. Managed by lora.ts. */
  get lora(): LoraState | null {
    return this.adapters.get(DEFAULT_ADAPTER) ?? null;
  }
  set lora(state: LoraState | null) {
    if (state) this.adapters.set(DEFAULT_ADAPTER, state);
    else this.adapters.delete(DEFAULT_ADAPTER);
  }

  /** Names of the LoRA adapters a forward (or a generation request) can select. */
  get adapterNames(): string[] {
    return [...this.adapters.keys()];
  }

  /** Tensors in the file layout (`[out, in]` linear weights), base weights only, in spec order. */
  baseTensors(): Map<string, FloatTensor> {
    return fileLayoutTensors(this.arch, (name) => this.variable(name));
  }

  /** The default adapter's variables; else every named adapter's (in name order); else the base weights. */
  get trainableVariables(): tf.Variable[] {
    if (this.lora) return loraTrainables(this.lora.weights);
    if (this.adapters.size > 0)
      return [...this.adapters.keys()].sort().flatMap((n) => loraTrainables(this.adapters.get(n)!.weights));
    return [...this.vars.values()];
  }

  /** Base weight names (Hugging Face names) in the fixed order. */
  get weightNames(): string[] {
    return [...this.vars.keys()];
  }

  /**
   * `[name, variable]` under Hugging Face names, without the per-instance tfjs scope (`agl_hf_<n>/`) of
   * `variable.name`: the base weights as in the checkpoint (`model.layers.0.self_attn.q_proj.weight`), then
   * LoRA adapters as PEFT saves them (`base_model.model.<module>.lora_A.weight`). `{ trainable: true }`:
   * only what an optimizer updates, in `trainableVariables` order. Values are in the model's layout: linear
   * weights and adapters are `[in, out]`, the transpose of the file's `[out, in]`.
   */
  namedParameters(options: { trainable?: boolean } = {}): Array<[string, tf.Variable]> {
    const adapters = this.lora ? peftNamedWeights(this.lora.weights) : [];
    if (options.trainable && this.lora) return adapters;
    return options.trainable ? [...this.vars.entries()] : [...this.vars.entries(), ...adapters];
  }

  variable(name: string): tf.Variable {
    const v = this.vars.get(name);
    if (!v) throw new Error(`No weight "${name}"`);
    return v;
  }

  get parameterCount(): number {
    let n = 0;
    for (const v of this.vars.values()) n += v.size;
    for (const lora of this.adapters.values()) n += loraSize(lora);
    return n;
  }

  /** The base's and the default adapter's (a row runs one adapter). */
  get matmulParameterCount(): number {
    return matmulParameters(this.arch) + (this.lora ? loraSize(this.lora) : 0);
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  clone(options: { trainable?: boolean; withAdapters?: boolean } = {}): PretrainedModel {
    const copy = new PretrainedModel(this.arch, (name) => this.variable(name).clone(), {
      contextLength: this.config.contextLength,
      rawConfig: this.rawConfig,
      sourceDir: this.sourceDir,
      generationConfig: this.generationConfig,
    });
    copy.sharePrefix = this.sharePrefix;
    copy.sharedPrefixMinTokens = this.sharedPrefixMinTokens;
    if (this.adapters.size > 0 && options.withAdapters !== false) {
      for (const [name, lora] of this.adapters) copy.adapters.set(name, cloneLora(lora, copy.scope, name));
      for (const v of copy.vars.values()) v.trainable = false;
    }
    if (options.trainable === false) for (const v of copy.trainableVariables) v.trainable = false;
    return copy;
  }

  frozenReference(): CausalLM {
    return this.lora ? new BaseModelView(this) : this.clone({ trainable: false });
  }

  setWeightsFrom(other: CausalLM): void {
    if (!(other instanceof PretrainedModel)) throw new Error("setWeightsFrom needs another PretrainedModel");
    for (const [name, v] of this.vars) v.assign(other.variable(name));
    for (const [adapter, lora] of this.adapters) assignLora(lora, other.adapters.get(adapter), adapter);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const v of this.vars.values()) v.dispose();
    for (const lora of this.adapters.values()) for (const w of lora.weights.values()) tf.dispose([w.a, w.b]);
    this.adapters.clear();
    this.masks.dispose();
    this.headMatrix.dispose();
    this.vars.clear();
  }

  /** @internal Run the decoder layers (see decoder.ts) on embedded tokens `x [B*T,d]`. */
  blocks(
    x: tf.Tensor2D,
    B: number,
    T: number,
    positions: Int32Array,
    bias: tf.Tensor,
    adapters: AdapterChoice,
    past?: LayerKV[],
    inference = false,
  ): { h: tf.Tensor2D; kv: LayerKV[] } {
    const weights = {
      arch: this.arch,
      adapters: this.adapters,
      weight: (name: string) => this.vars.get(name),
    };
    return decoderBlocks(weights, this.rotary, x, B, T, positions, bias, adapters, past, inference);
  }

  /** @internal The additive causal mask `[1,1,T,T]` (cached; do not dispose). */
  causalMask(T: number): tf.Tensor {
    return this.masks.get(T);
  }

  /** @internal The output head as a `[d, V]` matrix (see head-weight.ts). */
  headWeight(): tf.Tensor2D {
    const untied = this.arch.tieWordEmbeddings ? undefined : this.variable("lm_head.weight");
    return this.headMatrix.get(this.variable("model.embed_tokens.weight"), untied);
  }

  /** @internal Output logits `[rows, V]` of hidden states `h [rows, d]`. */
  head(h: tf.Tensor): tf.Tensor2D {
    return mm(h, this.headWeight()) as tf.Tensor2D;
  }

  /**
   * @internal Embeddings `[n, d]` of flat ids. `inference`: no gradient will be taken (generation), so
   * the rows are copied by the generation kernel where it is on.
   */
  embed(ids: Int32Array, inference = false): tf.Tensor2D {
    const table = this.variable("model.embed_tokens.weight") as tf.Tensor2D;
    return inference && generationKernels.enabled ? gatherRows(table, ids) : embedRows(table, ids);
  }

  /** @internal Final hidden states `[B*T,d]` of a batch, with or without the LoRA adapters. */
  forwardHidden(inputIds: IdsInput, attentionMask: MaskInput | undefined, adapters: AdapterChoice) {
    return batchHidden(this, inputIds, attentionMask, adapters);
  }

  /** @internal */
  forwardLogits(
    inputIds: IdsInput,
    attentionMask: MaskInput | undefined,
    adapters: AdapterChoice,
  ): tf.Tensor3D {
    const { h, B, T } = this.forwardHidden(inputIds, attentionMask, adapters);
    return tf.reshape(this.head(h), [B, T, this.config.vocabSize]);
  }

  // Public methods return one tensor and free their intermediates (tidy also works under variableGrads).
  hidden(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D {
    return tf.tidy(() => {
      const { h, B, T } = this.forwardHidden(inputIds, attentionMask, true);
      return tf.reshape(h, [B, T, this.config.dModel]);
    });
  }

  logits(inputIds: IdsInput, attentionMask?: MaskInput): tf.Tensor3D {
    return tf.tidy(() => this.forwardLogits(inputIds, attentionMask, true));
  }

  /**
   * @internal Log-probs of `ids[:, t+1]` (and entropies) at `temperature`, computed on the device by the
   * chunked head (see scoring.ts): the `[B, T, V]` logits are never materialised. With `raw`, also the
   * log-probs at temperature 1 from the same hidden states.
   */
  scores(
    inputIds: IdsInput,
    mask: MaskInput | undefined,
    options: { temperature: number; entropy: boolean; raw?: boolean; adapters: AdapterChoice },
  ): TokenScores {
    return scoreTokens(this, inputIds, mask, options);
  }

  /** @internal */
  logProbs(
    inputIds: IdsInput,
    mask: MaskInput | undefined,
    temperature: number,
    entropy: boolean,
    adapters: AdapterChoice,
  ) {
    const r = this.scores(inputIds, mask, { temperature, entropy, adapters });
    return { logProbs: r.logProbs, entropy: r.entropy };
  }

  /**
   * Log-probs of `ids[:, 1:]` and entropies at `temperature` (and, with `raw`, the log-probs at temperature
   * 1), without materialising the logits; PPO scores and trains through this.
   */
  tokenScores(ids: IdsInput, options: { temperature?: number; raw?: boolean } = {}) {
    const r = this.scores(ids, undefined, {
      temperature: options.temperature ?? 1,
      entropy: true,
      raw: options.raw,
      adapters: true,
    });
    return { logProbs: r.logProbs, entropy: r.entropy as tf.Tensor2D, raw: r.raw };
  }

  tokenLogProbs(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options: { temperature?: number } = {},
  ): tf.Tensor2D {
    return this.logProbs(inputIds, attentionMask, options.temperature ?? 1, false, true).logProbs;
  }

  tokenLogProbsWithEntropy(
    inputIds: IdsInput,
    attentionMask?: MaskInput,
    options: { temperature?: number } = {},
  ) {
    const r = this.logProbs(inputIds, attentionMask, options.temperature ?? 1, true, true);
    return { logProbs: r.logProbs, entropy: r.entropy as tf.Tensor2D };
  }

  prefill(ids: readonly number[]): { logits: Float32Array; cache: LayerKV[] } {
    return this.prefillMany([ids]);
  }

  /** @internal */
  prefillWith(prompts: ReadonlyArray<readonly number[]>, adapters: AdapterChoice) {
    return prefillRows(this, prompts, adapters);
  }

  /** `adapters`: one entry per prompt (see `AdapterChoice`); default the default adapter. */
  prefillMany(
    prompts: ReadonlyArray<readonly number[]>,
    adapters?: AdapterRows,
  ): { logits: Float32Array; cache: LayerKV[] } {
    return this.prefillWith(prompts, adapters ?? true);
  }

  prefillAfter(
    prefix: readonly LayerKV[],
    prompts: ReadonlyArray<readonly number[]>,
    adapters?: AdapterRows,
  ) {
    return prefillAfterRows(this, prefix, prompts, adapters ?? true);
  }

  /** @internal */
  decodeWith(
    tokens: readonly number[],
    positions: readonly number[],
    cache: LayerKV[],
    keyBias: tf.Tensor4D,
    adapters: AdapterChoice,
  ) {
    return decodeRows(this, tokens, positions, cache, keyBias, adapters);
  }

  decodeStep(
    tokens: readonly number[],
    positions: readonly number[],
    cache: LayerKV[],
    keyBias: tf.Tensor4D,
    adapters?: AdapterRows,
  ) {
    return this.decodeWith(tokens, positions, cache, keyBias, adapters ?? true);
  }

  /** Linear sites (`model.layers.<l>.<self_attn|mlp>.<module>`) of this architecture. */
  get linearSites() {
    return linearSites(this.arch);
  }
}
