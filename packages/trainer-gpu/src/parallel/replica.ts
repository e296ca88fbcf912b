import * as tf from "@tensorflow/tfjs";
import type { CausalLM } from "../model/causal-lm.js";
import type { ModelConfig } from "../model/config.js";
import { PolicyModel } from "../model/policy-model.js";
import type { ArchConfig } from "../pretrained/hf-config.js";
import { applyLora } from "../pretrained/lora.js";
import type { LoraSettings } from "../pretrained/lora-state.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { PolicyWorkerError } from "./errors.js";
import type { WeightsMessage } from "./protocol.js";

/**
 * How a worker rebuilds the main thread's policy: its kind and config, and the weights by name. A
 * `PolicyModel` is sent whole; a `PretrainedModel` as its base weights plus, with LoRA, the adapter
 * settings (the adapters are then what changes and is broadcast after each step).
 */
export type ModelSpec =
  | { kind: "policy"; config: ModelConfig; weights: WeightsMessage }
  | {
      kind: "pretrained";
      arch: ArchConfig;
      contextLength: number;
      rawConfig: Record<string, unknown>;
      generationConfig: Record<string, unknown> | null;
      base: WeightsMessage;
      lora: Omit<LoraSettings, "scale"> | null;
      adapters: WeightsMessage | null;
      /** Shared-prefix scoring settings (see `PretrainedModel.sharePrefix`), as the model had them. */
      sharePrefix: boolean;
      sharedPrefixMinTokens: number;
    };

/** The variables a weight broadcast carries, by name: all weights, or a LoRA model's adapters only. */
function broadcastVariables(model: CausalLM): Array<[string, tf.Variable]> {
  if (model instanceof PolicyModel) return model.weightNames.map((n) => [n, model.variable(n)]);
  if (model instanceof PretrainedModel) {
    if (model.lora)
      return [...model.lora.weights].flatMap(
        ([path, w]): Array<[string, tf.Variable]> => [
          [`${path}#lora_A`, w.a],
          [`${path}#lora_B`, w.b],
        ],
      );
    return model.weightNames.map((n) => [n, model.variable(n)]);
  }
  throw unsupported(model);
}

function unsupported(model: CausalLM): PolicyWorkerError {
  return new PolicyWorkerError(
    "unsupported_model",
    `worker threads replicate PolicyModel and PretrainedModel policies; this one is a ${model.constructor?.name ?? typeof model}`,
  );
}

function read(vars: Array<[string, tf.Variable]>): WeightsMessage {
  return {
    names: vars.map(([n]) => n),
    values: vars.map(([, v]) => Float32Array.from(v.dataSync() as Float32Array)),
  };
}

/** The weights a broadcast sends (after an optimizer step or a swap). */
export function broadcastWeights(model: CausalLM): WeightsMessage {
  return read(broadcastVariables(model));
}

/** Assign broadcast weights to a replica (names as `broadcastWeights` produced them). */
export function assignWeights(model: CausalLM, w: WeightsMessage): void {
  const vars = new Map(broadcastVariables(model));
  tf.tidy(() => {
    w.names.forEach((name, i) => {
      const v = vars.get(name);
      if (!v) throw new Error(`the replica has no weight "${name}"`);
      v.assign(tf.tensor(w.values[i] as Float32Array, v.shape));
    });
  });
}

/** Describe `model` for a worker (throws `unsupported_model` for other kinds). */
export function modelSpec(model: CausalLM): ModelSpec {
  if (model instanceof PolicyModel)
    return { kind: "policy", config: model.config, weights: broadcastWeights(model) };
  if (model instanceof PretrainedModel) {
    const lora = model.lora?.settings;
    return {
      kind: "pretrained",
      arch: model.arch,
      contextLength: model.config.contextLength,
      rawConfig: model.rawConfig,
      generationConfig: model.generationConfig,
      base: read(model.weightNames.map((n) => [n, model.variable(n)])),
      lora: lora
        ? { rank: lora.rank, alpha: lora.alpha, targetModules: lora.targetModules, useRslora: lora.useRslora }
        : null,
      adapters: lora ? broadcastWeights(model) : null,
      sharePrefix: model.sharePrefix,
      sharedPrefixMinTokens: model.sharedPrefixMinTokens,
    };
  }
  throw unsupported(model);
}

/** Build the replica a spec describes (in a worker). */
export function buildReplica(spec: ModelSpec): CausalLM {
  if (spec.kind === "policy") {
    const shapes = new Map(PolicyModel.weightSpecs(spec.config));
    const weights = new Map(
      spec.weights.names.map((n, i) => [n, tf.tensor(spec.weights.values[i] as Float32Array, shapes.get(n))]),
    );
    const model = PolicyModel.fromWeights(spec.config, weights);
    tf.dispose([...weights.values()]);
    return model;
  }
  const base = new Map(spec.base.names.map((n, i) => [n, spec.base.values[i] as Float32Array]));
  const model = new PretrainedModel(
    spec.arch,
    (name, shape) => {
      const data = base.get(name);
      if (!data) throw new Error(`the spec has no weight "${name}"`);
      return tf.tensor(data, shape);
    },
    { contextLength: spec.contextLength, rawConfig: spec.rawConfig, generationConfig: spec.generationConfig },
  );
  model.sharePrefix = spec.sharePrefix;
  model.sharedPrefixMinTokens = spec.sharedPrefixMinTokens;
  if (spec.lora && spec.adapters) {
    applyLora(model, spec.lora);
    assignWeights(model, spec.adapters);
  }
  return model;
}
