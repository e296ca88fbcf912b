export * from "./external-engine.js";
export * from "./reload-hook-sync.js";
export * from "./update-weights-hook.js";
export * from "./vllm-lora-sync.js";
export * from "./weight-sync.js";
