import * as tf from "@tensorflow/tfjs";
import type { ArchConfig } from "./hf-config.js";
import type { FloatTensor } from "./safetensors.js";

/**
 * The tensors of a Llama/Qwen/Mistral checkpoint, by their Hugging Face names and shapes. Linear weights
 * are `[out, in]` in the file and stored transposed (`[in, out]`) in the model so the forward pass is a
 * plain `x @ W` (the fast path on WASM).
 */

export const LINEAR_MODULES = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
] as const;
export type LinearModule = (typeof LINEAR_MODULES)[number];

export interface WeightSpec {
  /** Hugging Face tensor name. */
  name: string;
  /** Shape in the file. */
  shape: number[];
  /** A linear weight (`[out, in]` in the file, transposed in memory). */
  linear: boolean;
}

/** The linear module at `model.layers.<l>.<self_attn|mlp>.<module>`, its input and output widths. */
export interface LinearSite {
  path: string;
  layer: number;
  module: LinearModule;
  inFeatures: number;
  outFeatures: number;
  bias: boolean;
}

export function linearSites(a: ArchConfig): LinearSite[] {
  const d = a.hiddenSize;
  const q = a.numHeads * a.headDim;
  const kv = a.numKvHeads * a.headDim;
  const sites: LinearSite[] = [];
  for (let l = 0; l < a.numLayers; l++) {
    const attn = `model.layers.${l}.self_attn`;
    const mlp = `model.layers.${l}.mlp`;
    const add = (path: string, module: LinearModule, inF: number, outF: number, bias: boolean) =>
      sites.push({ path: `${path}.${module}`, layer: l, module, inFeatures: inF, outFeatures: outF, bias });
    add(attn, "q_proj", d, q, a.qkvBias);
    add(attn, "k_proj", d, kv, a.qkvBias);
    add(attn, "v_proj", d, kv, a.qkvBias);
    add(attn, "o_proj", q, d, a.oBias);
    add(mlp, "gate_proj", d, a.intermediateSize, a.mlpBias);
    add(mlp, "up_proj", d, a.intermediateSize, a.mlpBias);
    add(mlp, "down_proj", a.intermediateSize, d, a.mlpBias);
  }
  return sites;
}

/** Every tensor the checkpoint must hold, in a fixed order (also the optimizer-state order). */
export function weightSpecs(a: ArchConfig): WeightSpec[] {
  const d = a.hiddenSize;
  const specs: WeightSpec[] = [{ name: "model.embed_tokens.weight", shape: [a.vocabSize, d], linear: false }];
  const sites = linearSites(a);
  for (let l = 0; l < a.numLayers; l++) {
    const p = `model.layers.${l}`;
    specs.push({ name: `${p}.input_layernorm.weight`, shape: [d], linear: false });
    for (const s of sites.filter((x) => x.layer === l)) {
      if (s.module === "gate_proj") {
        specs.push({ name: `${p}.post_attention_layernorm.weight`, shape: [d], linear: false });
      }
      specs.push({ name: `${s.path}.weight`, shape: [s.outFeatures, s.inFeatures], linear: true });
      if (s.bias) specs.push({ name: `${s.path}.bias`, shape: [s.outFeatures], linear: false });
      if (s.module === "v_proj" && a.qkNorm) {
        specs.push(
          { name: `${p}.self_attn.q_norm.weight`, shape: [a.headDim], linear: false },
          { name: `${p}.self_attn.k_norm.weight`, shape: [a.headDim], linear: false },
        );
      }
    }
  }
  specs.push({ name: "model.norm.weight", shape: [d], linear: false });
  if (!a.tieWordEmbeddings) specs.push({ name: "lm_head.weight", shape: [a.vocabSize, d], linear: true });
  return specs;
}

/** Parameters in dense matmuls per token (the projections and the output head; embeddings are lookups). */
export function matmulParameters(a: ArchConfig): number {
  const perLayer = linearSites(a)
    .filter((s) => s.layer === 0)
    .reduce((n, s) => n + s.inFeatures * s.outFeatures, 0);
  return a.numLayers * perLayer + a.vocabSize * a.hiddenSize;
}

/**
 * Initial values of a random model (`PretrainedModel.random`): norm gains uniform in [0.8, 1.2], biases
 * normal(0, 0.1), other matrices normal(0, std); each weight seeded from `seed` and its order.
 */
export function randomInit(seed: number, std: number): (name: string, shape: number[]) => tf.Tensor {
  let i = 0;
  return (name, shape) => {
    i++;
    if (name.endsWith("norm.weight")) return tf.randomUniform(shape, 0.8, 1.2, "float32", seed * 1000 + i);
    return tf.randomNormal(shape, 0, name.endsWith(".bias") ? 0.1 : std, "float32", seed * 1000 + i);
  };
}

/** Initial values from tensors in the file layout (`[out, in]` linear weights are transposed). */
export function fileLayoutInit(
  arch: ArchConfig,
  get: (name: string) => FloatTensor,
): (name: string, shape: number[]) => tf.Tensor {
  const linear = new Set(
    weightSpecs(arch)
      .filter((s) => s.linear)
      .map((s) => s.name),
  );
  return (name) =>
    tf.tidy(() => {
      const t = get(name);
      const x = tf.tensor(t.data, t.shape);
      return linear.has(name) ? tf.transpose(x) : x;
    });
}

/** The base weights in the file layout (`[out, in]` linear weights), in spec order, copied off the device. */
export function fileLayoutTensors(
  arch: ArchConfig,
  variable: (name: string) => tf.Tensor,
): Map<string, FloatTensor> {
  const out = new Map<string, FloatTensor>();
  for (const spec of weightSpecs(arch)) {
    const v = variable(spec.name);
    const data = tf.tidy(() => (spec.linear ? tf.transpose(v) : v).dataSync() as Float32Array);
    out.set(spec.name, { shape: spec.shape, data: Float32Array.from(data) });
  }
  return out;
}
