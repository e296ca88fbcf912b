export { createStoreApp, DEFAULT_BODY_LIMIT_BYTES, DEFAULT_REQUEST_TIMEOUT_MS, type StoreAppOptions } from "./app.js";
export { startStoreServer, type StoreServer, type StoreServerOptions } from "./server.js";
export { jsonLinesLogger, silentServerLogger, type StoreServerLogger } from "./logging.js";
export type { ErrorBody } from "./errors.js";
export type { LegacyTask } from "./legacy.js";
export { convertTraceRequest, ATTEMPT_ID_KEY, ROLLOUT_ID_KEY, SEQUENCE_ID_KEY } from "./otlp/convert.js";
