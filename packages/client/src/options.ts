/**
 * Option schemas of the client's public constructors: unknown keys are errors naming the key (a typo
 * such as `tokn` must not silently leave a store unauthenticated) and URLs need their http(s) scheme.
 */
import {
  httpUrl,
  isLightningStore,
  isLogger,
  type LightningStore,
  type Logger,
  parseOptions,
} from "@agl/core";
import { z } from "zod";
import type { LightningStoreClientOptions } from "./store-client.js";
import type { WorkerOptions } from "./worker.js";

const delays = z.array(z.number().min(0)).readonly();

const clientShape = {
  url: httpUrl("store URL"),
  token: z.string().nullish(),
  timeoutMs: z.number().positive().optional(),
  retryDelaysMs: delays.optional(),
  healthRetryDelaysMs: delays.optional(),
  connections: z.number().int().min(1).optional(),
  fetch: z.custom<typeof fetch>((v) => typeof v === "function", "must be a fetch function").optional(),
  waitChunkSeconds: z.number().positive().optional(),
} satisfies Record<keyof LightningStoreClientOptions, z.ZodType>;

const LightningStoreClientOptionsShape = z.object(clientShape);

export function parseClientOptions(
  options: LightningStoreClientOptions | string,
): LightningStoreClientOptions {
  const value = typeof options === "string" ? { url: options } : options;
  return parseOptions(LightningStoreClientOptionsShape, value, "storeClient") as LightningStoreClientOptions;
}

const WorkerOptionsShape = z.object({
  store: z.union([
    httpUrl("store URL"),
    z.custom<LightningStore>(isLightningStore, "must be a store server URL or a LightningStore"),
  ]),
  agent: z.custom<WorkerOptions["agent"]>(
    (v) => typeof v === "function" || (typeof v === "object" && v !== null),
    "must be an agent",
  ),
  token: z.string().nullish(),
  concurrency: z.number().int().min(1).optional(),
  workerId: z.string().min(1).optional(),
  proxyTokenSecret: z.string().optional(),
  pollIntervalMs: z.number().min(0).optional(),
  gracePeriodMs: z.number().min(0).optional(),
  maxRollouts: z.number().int().min(1).optional(),
  heartbeatIntervalSeconds: z.number().positive().optional(),
  defaultTimeoutSeconds: z.number().positive().nullish(),
  startupTimeoutSeconds: z.number().min(0).optional(),
  handleSignals: z.boolean().optional(),
  logger: z.custom<Logger>(isLogger, "must have debug/info/warn/error methods").optional(),
} satisfies Record<keyof WorkerOptions, z.ZodType>);

export const WorkerOptionsSchema = {
  parse: (options: WorkerOptions): WorkerOptions =>
    parseOptions(WorkerOptionsShape, options, "worker") as WorkerOptions,
};
