import * as tf from "@tensorflow/tfjs";
import { z } from "zod";
import { createRng } from "../generate/sampling.js";
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
  const o = LoraOptionsSchema.parse(options);
  const targets = new Set<LinearModule>(o.targetModules);
  const rng = createRng(o.seed);
  const weights = new Map<string, LoraWeights>();
  for (const site of model.linearSites) {
    if (!targets.has(site.module)) continue;
    const bound = 1 / Math.sqrt(site.inFeatures);
    const a = new Float32Array(site.inFeatures * o.rank);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rng() - 1) * bound;
    weights.set(site.path, {
      a: tf.variable(tf.tensor2d(a, [site.inFeatures, o.rank]), true, `${model.scope}/${site.path}.lora_A`),
      b: tf.variable(tf.zeros([o.rank, site.outFeatures]), true, `${model.scope}/${site.path}.lora_B`),
    });
  }
  for (const name of model.weightNames) model.variable(name).trainable = false;
  const settings: LoraSettings = {
    rank: o.rank,
    alpha: o.alpha,
    targetModules: LINEAR_MODULES.filter((m) => targets.has(m)),
    useRslora: o.useRslora,
    scale: loraScale(o.rank, o.alpha, o.useRslora),
  };
  model.lora = { settings, weights };
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
  for (const name of model.weightNames) model.variable(name).trainable = true;
  return model;
}
