export * from "./data-parallel.js";
export * from "./errors.js";
export * from "./pool.js";
export * from "./pooled-generator.js";
