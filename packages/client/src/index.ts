export { LightningStoreClient, type LightningStoreClientOptions } from "./store-client.js";
export {
  HttpClientError,
  HttpError,
  HttpNetworkError,
  HttpServerError,
  RemoteIllegalTransitionError,
  RemoteInvalidArgumentError,
  RemoteNotFoundError,
  type HttpErrorFields,
  type ServerErrorInfo,
} from "./http/errors.js";
export type { TransportOptions } from "./http/transport.js";
export { Worker, type WorkerOptions } from "./worker.js";
export { loadAgent } from "./load-agent.js";
export {
  AgentLightningClient,
  LegacyTaskSchema,
  type AgentLightningClientOptions,
  type GenericResponse,
  type LegacyRollout,
  type LegacyTask,
} from "./legacy-client.js";
export {
  httpAgent,
  HttpAgentError,
  type HttpAgentOptions,
  type HttpAgentRequest,
  type HttpAgentResponse,
} from "./http-agent.js";
