export * from "./format.js";
export * from "./policy-server.js";
export * from "./schemas.js";
export * from "./version-publication.js";
export type { WeightsLoader } from "./weights-route.js";
