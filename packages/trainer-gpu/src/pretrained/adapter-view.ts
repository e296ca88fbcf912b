import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";
import { DEFAULT_ADAPTER, UnknownAdapterError } from "./adapter-rows.js";
import { BaseModelView } from "./base-view.js";
import { loraTrainables } from "./lora-state.js";
import type { PretrainedModel } from "./pretrained-model.js";

/**
 * One named LoRA adapter of a multi-adapter model as a `CausalLM` of its own: every forward runs that
 * adapter, `trainableVariables` are its A/B matrices only, and its KL reference is the shared base (a
 * `BaseModelView`). It owns nothing: the base and the adapter stay the model's, so PPO trains each policy
 * of a multi-policy run through its view with its own optimizer, never touching another adapter.
 */
export class AdapterView extends BaseModelView {
  constructor(
    model: PretrainedModel,
    readonly adapterName: string,
  ) {
    if (!model.adapters.has(adapterName)) throw new UnknownAdapterError(adapterName, model.adapterNames);
    super(model, adapterName);
  }

  override get trainableVariables(): tf.Variable[] {
    const lora = this.model.adapters.get(this.adapterName);
    return lora ? loraTrainables(lora.weights) : [];
  }

  override get parameterCount(): number {
    return super.parameterCount + this.trainableVariables.reduce((n, v) => n + v.size, 0);
  }

  override get matmulParameterCount(): number {
    return super.matmulParameterCount + this.trainableVariables.reduce((n, v) => n + v.size, 0);
  }

  /** A standalone model: a copy of the base with this adapter's weights as its default adapter. */
  override clone(options: { trainable?: boolean } = {}): CausalLM {
    const copy = this.model.clone({ withAdapters: false });
    const lora = this.model.adapters.get(this.adapterName)!;
    const weights = new Map(
      [...lora.weights].map(([path, w]) => [
        path,
        {
          a: tf.variable(w.a.clone(), options.trainable !== false, `${copy.scope}/${path}.lora_A`),
          b: tf.variable(w.b.clone(), options.trainable !== false, `${copy.scope}/${path}.lora_B`),
        },
      ]),
    );
    copy.adapters.set(DEFAULT_ADAPTER, { settings: { ...lora.settings }, weights });
    for (const name of copy.weightNames) copy.variable(name).trainable = false;
    return copy;
  }

  override frozenReference(): CausalLM {
    return new BaseModelView(this.model);
  }

  /** Copy this adapter's weights from another view, or from a model's adapter of the same name (else its default). */
  override setWeightsFrom(other: CausalLM): void {
    const src =
      other instanceof AdapterView
        ? other.model.adapters.get(other.adapterName)
        : ((other as PretrainedModel).adapters?.get(this.adapterName) ??
          (other as PretrainedModel).adapters?.get(DEFAULT_ADAPTER));
    const mine = this.model.adapters.get(this.adapterName)!;
    if (!src) throw new Error(`setWeightsFrom: the other model has no adapter for "${this.adapterName}"`);
    for (const [path, w] of mine.weights) {
      const o = src.weights.get(path);
      if (!o) throw new Error(`setWeightsFrom: the other adapter has no weights on ${path}`);
      w.a.assign(o.a);
      w.b.assign(o.b);
    }
  }
}

/** The view of `model`'s adapter `name` (see `AdapterView`). */
export function adapterView(model: PretrainedModel, name: string): AdapterView {
  return new AdapterView(model, name);
}
