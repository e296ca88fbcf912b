import type * as tf from "@tensorflow/tfjs";
import type { LinearModule } from "./weights.js";

/** LoRA settings as PEFT names them (`r`, `lora_alpha`, `target_modules`, `use_rslora`). */
export interface LoraSettings {
  rank: number;
  alpha: number;
  targetModules: LinearModule[];
  useRslora: boolean;
  /** `alpha / rank` (or `alpha / sqrt(rank)` with rsLoRA). */
  scale: number;
}

/**
 * One adapter, stored for a fast forward: `a` is PEFT's `lora_A.weight` transposed (`[in, r]`), `b` is
 * `lora_B.weight` transposed (`[r, out]`); the layer adds `scale * x @ a @ b`.
 */
export interface LoraWeights {
  a: tf.Variable;
  b: tf.Variable;
}

/** Adapter variables in a fixed order (site order, A before B): the optimizer's variable list. */
export function loraTrainables(weights: ReadonlyMap<string, LoraWeights>): tf.Variable[] {
  return [...weights.values()].flatMap((w) => [w.a, w.b]);
}

/** Where PEFT's adapter files put a module's adapters: `base_model.model.<module path>`. */
export const PEFT_PREFIX = "base_model.model.";

/** A module's adapter weight under its PEFT name (`…q_proj.lora_A.weight`). */
export function peftKey(path: string, which: "A" | "B"): string {
  return `${PEFT_PREFIX}${path}.lora_${which}.weight`;
}

/**
 * `[name, variable]` of an adapter's weights as PEFT saves them (`base_model.model.<module>.lora_A.weight`),
 * in site order, A before B.
 */
export function peftNamedWeights(weights: ReadonlyMap<string, LoraWeights>): Array<[string, tf.Variable]> {
  return [...weights.entries()].flatMap(([path, w]) => [
    [peftKey(path, "A"), w.a],
    [peftKey(path, "B"), w.b],
  ]);
}
