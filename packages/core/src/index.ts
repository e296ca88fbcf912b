export * from "./errors.js";
export * from "./types/ids.js";
export * from "./types/misc.js";
export * from "./types/resources.js";
export * from "./types/rollout.js";
export * from "./types/span.js";
export * from "./types/validate.js";
export * from "./store/state-machine.js";
export type * from "./store/store.js";
