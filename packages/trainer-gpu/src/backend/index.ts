export * from "./select.js";
