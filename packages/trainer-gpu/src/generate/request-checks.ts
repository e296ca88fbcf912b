import type { CausalLM } from "../model/causal-lm.js";
import type { GenerateRequest } from "./request.js";

/** Why `model` cannot serve `request` (empty or out-of-vocabulary prompt, unknown adapter, no room), or null. */
export function requestError(model: CausalLM, request: GenerateRequest): Error | null {
  const ctx = model.config.contextLength;
  if (request.promptIds.length === 0) return new Error("promptIds must not be empty");
  const V = model.config.vocabSize;
  if (request.promptIds.some((id) => !Number.isInteger(id) || id < 0 || id >= V)) {
    return new Error(`promptIds must be integers in [0, ${V})`);
  }
  if (request.adapter !== undefined) {
    const names = model.adapterNames;
    if (!names) return new Error("this model serves no LoRA adapters (adapter must be absent)");
    if (request.adapter !== null && !names.includes(request.adapter))
      return new Error(`No LoRA adapter "${request.adapter}" (the model has: ${names.join(", ")})`);
  }
  if (request.promptIds.length >= ctx) {
    return new Error(`prompt of ${request.promptIds.length} tokens leaves no room in the context of ${ctx}`);
  }
  return null;
}
