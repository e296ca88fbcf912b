export { type PreparedExample, prepareExample, type RawSftExample } from "./examples.js";
export * from "./sft.js";
export * from "./sft-loss.js";
export * from "./train-step.js";
