/**
 * @agl/trainer-gpu: a TensorFlow.js policy (model, tokenizer, chat template, generation with dynamic
 * batching), its OpenAI-compatible server, supervised fine-tuning, and the PPO/GRPO trainer.
 */

/** The tfjs instance this package uses (share it to avoid two tfjs copies with separate engines). */
export * as tf from "@tensorflow/tfjs";
export * from "./backend/index.js";
export * from "./diagnostics/index.js";
export * from "./engine/index.js";
export * from "./generate/index.js";
export * from "./model/index.js";
export * from "./parallel/index.js";
export * from "./ppo/index.js";
export * from "./pretrained/index.js";
export * from "./server/index.js";
export * from "./sft/index.js";
export * from "./tokenizer/index.js";
