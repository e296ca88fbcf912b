export {
  createStoreApp,
  DEFAULT_BODY_LIMIT_BYTES,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type StoreAppOptions,
} from "./app.js";
export type { ErrorBody } from "./errors.js";
export type { LegacyTask } from "./legacy.js";
export { jsonLinesLogger, type StoreServerLogger, silentServerLogger } from "./logging.js";
export { ATTEMPT_ID_KEY, convertTraceRequest, ROLLOUT_ID_KEY, SEQUENCE_ID_KEY } from "./otlp/convert.js";
export { type StoreServer, type StoreServerOptions, startStoreServer } from "./server.js";
