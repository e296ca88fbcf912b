export * from "./gpu-check.js";
