import { InvalidArgumentError, parseOptions } from "@agl/core";
import { z } from "zod";
import type { StoreServerOptions } from "./server.js";

/**
 * Every option of startStoreServer. `satisfies` makes this list fail to compile when an option is added
 * to StoreServerOptions (or StoreAppOptions) without it, so the unknown-key check never rejects a real one.
 */
const KNOWN = {
  store: true,
  host: true,
  port: true,
  closeTimeoutMs: true,
  closeStore: true,
  token: true,
  bodyLimitBytes: true,
  requestTimeoutMs: true,
  maxWaitSeconds: true,
  logger: true,
  legacyTaskTimeoutSeconds: true,
  publicUrl: true,
  dashboard: true,
  maxConnections: true,
  headersTimeoutMs: true,
  requestSummaryMs: true,
} satisfies Record<keyof StoreServerOptions, true>;

const Shape = z.object(
  Object.fromEntries(Object.keys(KNOWN).map((key) => [key, z.unknown().optional()])) as Record<
    keyof typeof KNOWN,
    z.ZodOptional<z.ZodUnknown>
  >,
);

/**
 * Reject unknown keys (naming them: `tokn` must not start an open server) and a token that is not a
 * string; each option's own range checks stay where the option is used.
 */
export function checkStoreServerOptions(options: StoreServerOptions): void {
  parseOptions(Shape, options, "storeServer");
  const token = options.token;
  if (token !== undefined && token !== null && (typeof token !== "string" || token === "")) {
    throw new InvalidArgumentError("storeServer.token", "must be a non-empty string, null or absent");
  }
  const summary = options.requestSummaryMs;
  if (summary !== undefined && !(typeof summary === "number" && Number.isFinite(summary) && summary >= 0)) {
    throw new InvalidArgumentError("storeServer.requestSummaryMs", "must be a number of ms >= 0");
  }
}
