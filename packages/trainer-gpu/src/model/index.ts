export type { CausalLM, CausalLMConfig } from "./causal-lm.js";
export * from "./checkpoint.js";
export * from "./config.js";
export { lengthBalancedMicroBatches } from "./micro-batches.js";
export { gelu, layerNorm, mm, oneHotF } from "./ops.js";
export * from "./policy-model.js";
