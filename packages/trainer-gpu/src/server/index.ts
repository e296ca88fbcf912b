export * from "./format.js";
export * from "./policy-server.js";
export * from "./schemas.js";
