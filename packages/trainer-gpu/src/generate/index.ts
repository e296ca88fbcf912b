export * from "./generator.js";
export * from "./sampling.js";
