import * as tf from "@tensorflow/tfjs";
import type { CausalLM, IdsInput, LayerKV, MaskInput } from "../model/causal-lm.js";
import { prefillAfterRows } from "./incremental.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { matmulParameters } from "./weights.js";

/**
 * The base model of a LoRA model with its adapters switched off: the KL reference policy. It shares the
 * (frozen) base weights, so it costs no memory; it owns nothing and trains nothing.
 */
export class BaseModelView implements CausalLM {
  /** `adapter`: run with this named adapter instead of none (see `AdapterView`). */
  constructor(
    readonly model: PretrainedModel,
    protected readonly adapter: string | false = false,
  ) {}

  get config() {
    return this.model.config;
  }
  get trainableVariables(): tf.Variable[] {
    return [];
  }
  get parameterCount(): number {
    return this.model.weightNames.reduce((n, name) => n + this.model.variable(name).size, 0);
  }
  get matmulParameterCount(): number {
    return matmulParameters(this.model.arch);
  }
  get isDisposed(): boolean {
    return this.model.isDisposed;
  }
  logits(ids: IdsInput, mask?: MaskInput): tf.Tensor3D {
    return this.model.forwardLogits(ids, mask, this.adapter);
  }
  hidden(ids: IdsInput, mask?: MaskInput): tf.Tensor3D {
    const { h, B, T } = this.model.forwardHidden(ids, mask, this.adapter);
    return tf.reshape(h, [B, T, this.config.dModel]);
  }
  tokenLogProbs(ids: IdsInput, mask?: MaskInput, o: { temperature?: number } = {}): tf.Tensor2D {
    return this.model.logProbs(ids, mask, o.temperature ?? 1, false, this.adapter).logProbs;
  }
  tokenLogProbsWithEntropy(ids: IdsInput, mask?: MaskInput, o: { temperature?: number } = {}) {
    const r = this.model.logProbs(ids, mask, o.temperature ?? 1, true, this.adapter);
    return { logProbs: r.logProbs, entropy: r.entropy as tf.Tensor2D };
  }
  /** Log-probs and entropies of `ids[:, 1:]` without the adapters (see `PretrainedModel.tokenScores`). */
  tokenScores(ids: IdsInput, o: { temperature?: number; raw?: boolean } = {}) {
    const r = this.model.scores(ids, undefined, {
      temperature: o.temperature ?? 1,
      entropy: true,
      raw: o.raw,
      adapters: this.adapter,
    });
    return { logProbs: r.logProbs, entropy: r.entropy as tf.Tensor2D, raw: r.raw };
  }
  prefill(ids: readonly number[]) {
    return this.model.prefillWith([ids], this.adapter);
  }
  prefillMany(prompts: ReadonlyArray<readonly number[]>) {
    return this.model.prefillWith(prompts, this.adapter);
  }
  prefillAfter(prefix: readonly LayerKV[], prompts: ReadonlyArray<readonly number[]>) {
    return prefillAfterRows(this.model, prefix, prompts, false);
  }
  decodeStep(
    tokens: readonly number[],
    positions: readonly number[],
    cache: LayerKV[],
    keyBias: tf.Tensor4D,
  ) {
    return this.model.decodeWith(tokens, positions, cache, keyBias, this.adapter);
  }
  /** A standalone frozen copy of the base weights (no adapters). */
  clone(): CausalLM {
    return this.model.clone({ trainable: false, withAdapters: false });
  }
  frozenReference(): CausalLM {
    return this;
  }
  /** Nothing to copy: the view always reads the model's current base weights. */
  setWeightsFrom(_other: CausalLM): void {}
  /** Owns nothing: disposing the model frees the weights. */
  dispose(): void {}
}
