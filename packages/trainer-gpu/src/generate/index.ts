export * from "./engine.js";
export * from "./generator.js";
export { PrefixCache, type PrefixCacheOptions, type PrefixCacheStats } from "./prefix-cache.js";
export * from "./request.js";
export * from "./sampling.js";
export * from "./sampling-defaults.js";
