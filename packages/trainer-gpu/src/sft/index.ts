export { type PreparedExample, prepareExample, type RawSftExample } from "./examples.js";
export * from "./sft.js";
