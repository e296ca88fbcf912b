import * as tf from "@tensorflow/tfjs";
import { z } from "zod";
import { createRng } from "../generate/sampling.js";
import { DEFAULT_ADAPTER, UnknownAdapterError } from "./adapter-rows.js";
import type { LoraSettings, LoraWeights } from "./lora-state.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { LINEAR_MODULES, type LinearModule } from "./weights.js";

/**
 * LoRA (Hu et al.; PEFT's `LoraConfig` semantics): each targeted linear layer gets `W x + scale * B A x`
 * with `A [r, in]` initialised like PEFT (Kaiming-uniform, bound `1/sqrt(in)`) and `B [out, r]` zero, so
 * a fresh adapter leaves the model unchanged. After `applyLora` only the adapters are trainable: the base
 * variables are frozen and `model.trainableVariables` (what sft() and PPO optimise) lists adapters only.
 */

export const LoraOptionsSchema = z.strictObject({
  rank: z.number().int().min(1).default(8),
  alpha: z.number().positive().default(16),
  targetModules: z
    .array(z.enum(LINEAR_MODULES))
    .min(1)
    .default(["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
  /** rsLoRA scaling `alpha / sqrt(rank)` instead of `alpha / rank`. */
  useRslora: z.boolean().default(false),
  /** Seed of the A initialisation. */
  seed: z.number().int().default(0),
});
export type LoraOptions = z.input<typeof LoraOptionsSchema>;

export function loraScale(rank: number, alpha: number, useRslora: boolean): number {
  return useRslora ? alpha / Math.sqrt(rank) : alpha / rank;
}

/** Add LoRA adapters to `model` in place and freeze its base weights. Returns the model. */
export function applyLora(model: PretrainedModel, options: LoraOptions = {}): PretrainedModel {
  if (model.lora) throw new Error("applyLora: the model already has LoRA adapters (mergeLora first)");
  return addLoraAdapter(model, DEFAULT_ADAPTER, options);
}

const AdapterNameSchema = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, "letters, digits, '.', '_' or '-' (at most 128)");

/**
 * Add a named LoRA adapter (one policy of a multi-policy run) to `model` in place, over the same frozen
 * base weights as every other adapter: only the adapter's own A/B matrices are allocated. A forward or a
 * generation request selects it by name (`AdapterChoice`); `adapterView(model, name)` trains it alone.
 */
export function addLoraAdapter(
  model: PretrainedModel,
  name: string,
  options: LoraOptions = {},
): PretrainedModel {
  const parsedName = AdapterNameSchema.safeParse(name);
  if (!parsedName.success)
    throw new Error(`addLoraAdapter: invalid adapter name "${name}": ${parsedName.error.issues[0]?.message}`);
  if (model.adapters.has(name)) throw new Error(`addLoraAdapter: the model already has an adapter "${name}"`);
  const o = LoraOptionsSchema.parse(options);
  const prefix = name === DEFAULT_ADAPTER ? model.scope : `${model.scope}/${name}`;
  const targets = new Set<LinearModule>(o.targetModules);
  const rng = createRng(o.seed);
  const weights = new Map<string, LoraWeights>();
  for (const site of model.linearSites) {
    if (!targets.has(site.module)) continue;
    const bound = 1 / Math.sqrt(site.inFeatures);
    const a = new Float32Array(site.inFeatures * o.rank);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rng() - 1) * bound;
    // tf.variable keeps its own copy: the initial values are freed here (no leak per adapter).
    const a0 = tf.tensor2d(a, [site.inFeatures, o.rank]);
    const b0 = tf.zeros([o.rank, site.outFeatures]);
    weights.set(site.path, {
      a: tf.variable(a0, true, `${prefix}/${site.path}.lora_A`),
      b: tf.variable(b0, true, `${prefix}/${site.path}.lora_B`),
    });
    tf.dispose([a0, b0]);
  }
  for (const name of model.weightNames) model.variable(name).trainable = false;
  const settings: LoraSettings = {
    rank: o.rank,
    alpha: o.alpha,
    targetModules: LINEAR_MODULES.filter((m) => targets.has(m)),
    useRslora: o.useRslora,
    scale: loraScale(o.rank, o.alpha, o.useRslora),
  };
  model.adapters.set(name, { settings, weights });
  return model;
}

/** Remove a named adapter and free its weights; the base becomes trainable again when none is left. */
export function removeLoraAdapter(model: PretrainedModel, name: string): PretrainedModel {
  const lora = model.adapters.get(name);
  if (!lora) throw new UnknownAdapterError(name, model.adapterNames);
  for (const w of lora.weights.values()) tf.dispose([w.a, w.b]);
  model.adapters.delete(name);
  if (model.adapters.size === 0) for (const n of model.weightNames) model.variable(n).trainable = true;
  return model;
}

/** `W + scale * A @ B` in the in-memory layout (`[in, out]`) for one adapted site. */
export function mergedWeight(model: PretrainedModel, path: string): tf.Tensor2D {
  const lora = model.lora?.weights.get(path);
  const w = model.variable(`${path}.weight`);
  if (!lora || !model.lora) return w.clone() as tf.Tensor2D;
  const scale = model.lora.settings.scale;
  return tf.tidy(() => tf.add(w, tf.mul(tf.matMul(lora.a, lora.b), scale)) as tf.Tensor2D);
}

/**
 * Fold the adapters into the base weights and remove them (in place); the base becomes trainable again.
 * The merged model computes the same function as the adapted one.
 */
export function mergeLora(model: PretrainedModel): PretrainedModel {
  if (!model.lora) return model;
  for (const path of model.lora.weights.keys()) {
    const merged = mergedWeight(model, path);
    model.variable(`${path}.weight`).assign(merged);
    merged.dispose();
  }
  for (const w of model.lora.weights.values()) tf.dispose([w.a, w.b]);
  model.lora = null;
  if (model.adapters.size === 0) for (const name of model.weightNames) model.variable(name).trainable = true;
  return model;
}
