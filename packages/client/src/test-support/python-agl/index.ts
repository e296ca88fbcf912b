export * from "./llm-proxy.js";
export * from "./store-server.js";
