import type { LightningStore } from "@agl/core";
import { LLMProxy, type LLMProxyOptions } from "@agl/proxy";

/**
 * The LLM proxy the cross-package tests put in front of the mock server: one backend, the model name
 * "policy", no health checks or retries (a failure must show, not be retried away) and no log output.
 */
export function quietProxy(
  store: LightningStore,
  backendUrl: string,
  options: Partial<LLMProxyOptions> = {},
): LLMProxy {
  return new LLMProxy({
    store,
    backends: [{ url: backendUrl }],
    model: "policy",
    healthCheckIntervalMs: 0,
    retries: 0,
    logger: { warn() {}, error() {} },
    ...options,
  });
}
