export * from "./checkpoint.js";
export * from "./config.js";
export { gelu, layerNorm, mm, oneHotF } from "./ops.js";
export * from "./policy-model.js";
