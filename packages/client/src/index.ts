export {
  HttpClientError,
  HttpError,
  type HttpErrorFields,
  HttpNetworkError,
  HttpServerError,
  RemoteIllegalTransitionError,
  RemoteInvalidArgumentError,
  RemoteNotFoundError,
  type ServerErrorInfo,
} from "./http/errors.js";
export type { TransportOptions } from "./http/transport.js";
export {
  HttpAgentError,
  type HttpAgentOptions,
  type HttpAgentRequest,
  type HttpAgentResponse,
  httpAgent,
} from "./http-agent.js";
export {
  AgentLightningClient,
  type AgentLightningClientOptions,
  type GenericResponse,
  type LegacyRollout,
  type LegacyTask,
  LegacyTaskSchema,
} from "./legacy-client.js";
export { AgentModuleError, loadAgent } from "./load-agent.js";
export { probeStore, StoreAuthError, StoreUnreachableError } from "./probe.js";
export {
  LightningStoreClient,
  type LightningStoreClientOptions,
  type StoreServerInfo,
} from "./store-client.js";
export { DEFAULT_WORKER_TIMEOUT_SECONDS, Worker, type WorkerOptions } from "./worker.js";
