import { InMemoryLightningStore } from "@agl/core";
import { LLMProxy } from "@agl/proxy";
import OpenAI from "openai";

/**
 * An LLM proxy in front of `backendUrl` (serving model "policy", proxy-level version 1000) with one
 * rollout started: `client` calls through the proxy on that rollout, `spans()` reads what it recorded.
 */
export async function proxiedRollout(backendUrl: string) {
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = new LLMProxy({
    store,
    backends: [{ url: backendUrl }],
    model: "policy",
    healthCheckIntervalMs: 0,
    adminToken: "admin-token-for-tests",
  });
  const url = await proxy.start();
  await proxy.resume({ modelVersion: 1000 });
  const r = await store.startRollout({ input: { q: 1 } });
  const client = new OpenAI({
    baseURL: `${url}/rollout/${r.rollout_id}/attempt/${r.attempt.attempt_id}/v1`,
    apiKey: "admin-token-for-tests",
    maxRetries: 0,
  });
  return {
    rolloutId: r.rollout_id,
    client,
    spans: async () => {
      await proxy.flush();
      return (await store.querySpans(r.rollout_id)).items;
    },
    stop: () => proxy.stop(),
  };
}
