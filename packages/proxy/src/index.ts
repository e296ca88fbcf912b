export type { BackendConfig, BackendState } from "./backends.js";
export { rendezvousScore } from "./backends.js";
export type { CaptureCounters } from "./call-recorder.js";
export { buildCallSpan, type CallRecord, choiceLogprobs } from "./capture.js";
export { DialectRequestError, ResponseHistory } from "./dialects/index.js";
export type { LLMProxyOptions, ProxyLogger, ResolvedProxyOptions, SpanSink } from "./options.js";
export { LLMProxyOptionsSchema } from "./options.js";
export { DrainTimeoutError, type PauseMode, type PauseOptions, type PauseState } from "./pause.js";
export { LLMProxy } from "./proxy.js";
export { RELAY_PROTOCOL_VERSION } from "./relay/protocol.js";
export { RELAY_PATH } from "./relay/relay-hub.js";
export { type RelayWorker, type RelayWorkerOptions, startRelayWorker } from "./relay/relay-worker.js";
export {
  type AttributionStyle,
  type LLMOperation,
  type Mode,
  matchLLMRoute,
  type RouteMatch,
} from "./routes.js";
export { type AttemptClaims, ScopedTokenIssuer } from "./scoped-tokens.js";
export type { SessionRecord, SessionTurn } from "./sessions.js";
export { StreamAssembler } from "./stream-assembler.js";
