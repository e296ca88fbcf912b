export * from "./sft.js";
