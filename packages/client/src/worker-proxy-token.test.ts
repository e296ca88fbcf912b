import {
  InMemoryLightningStore,
  proxyLLM,
  type RolloutContext,
  ScopedTokenSigner,
  silentLogger,
} from "@agl/core";
import { expect, it } from "vitest";
import { Worker } from "./worker.js";

it("a Worker with proxyTokenSecret hands each agent a token scoped to its own attempt", async () => {
  const secret = "worker-proxy-token-secret-0123";
  const store = new InMemoryLightningStore({ watchdog: false });
  await store.addResources({ main_llm: proxyLLM({ endpoint: "http://127.0.0.1:1/v1", model: "m" }) });
  await store.enqueueRollout({ input: 1 });
  const seen: Array<{ key: string | null; rid: string; aid: string }> = [];
  const worker = new Worker({
    store,
    agent: async (_task: unknown, { llm, rollout }: RolloutContext) => {
      seen.push({ key: llm!.api_key, rid: rollout.rollout_id, aid: rollout.attempt.attempt_id });
      return 1;
    },
    proxyTokenSecret: secret,
    maxRollouts: 1,
    pollIntervalMs: 5,
    handleSignals: false,
    logger: silentLogger,
  });
  expect((await worker.run()).succeeded).toBe(1);
  const [{ key, rid, aid }] = seen as [(typeof seen)[0]];
  expect(new ScopedTokenSigner(secret).verify(key!)).toMatchObject({ rolloutId: rid, attemptId: aid });
  await store.close();
});
