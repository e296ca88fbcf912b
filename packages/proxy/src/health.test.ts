import { startMockLLMServer } from "@agl/core/mock-llm";
import { until } from "@agl/core/testing";
import { describe, expect, it } from "vitest";
import { rendezvousScore } from "./backends.js";
import { startHarness } from "./test-support/harness.js";

const messages = [{ role: "user" as const, content: "hi" }];

describe("active health checks", () => {
  it("take a dead backend out of rotation before any call fails, and bring it back", async () => {
    const h = await startHarness({
      mocks: [{}, {}],
      tap: false,
      proxy: { healthCheckIntervalMs: 50, healthCheckTimeoutMs: 200 },
    });
    try {
      const urls = h.mocks.map((m) => `${m.url}/v1`);
      let a: { rolloutId: string; attemptId: string } | null = null;
      for (let i = 0; i < 200 && !a; i++) {
        const c = await h.newAttempt();
        const s = urls.map((u) => rendezvousScore(c.rolloutId, { hashSeed: u, weight: 1 }));
        if (s[0]! > s[1]!) a = c;
      }
      const deadPort = Number(new URL(h.mocks[0]!.url).port);
      await h.mocks[0]!.close();
      await until(() => !h.proxy.state().backends[0]!.healthy);
      expect(h.proxy.state().backends.map((b) => b.healthy)).toEqual([false, true]);
      expect(h.warnings.some((w) => w.includes("failed its health check"))).toBe(true);
      const client = h.client(`${h.url}/rollout/${a!.rolloutId}/attempt/${a!.attemptId}/v1`);
      await client.chat.completions.create({ model: "m", messages });
      const [span] = await h.spans(a!.rolloutId);
      expect(span!.attributes).toMatchObject({ "agl.proxy.retry_count": 0, "agl.proxy.backend": urls[1] });
      // the replica comes back on the same port: it is healthy again and the rollout returns to it
      const revived = await startMockLLMServer({ port: deadPort });
      try {
        await until(() => h.proxy.state().backends[0]!.healthy);
        expect(h.proxy.state().backends.map((b) => b.healthy)).toEqual([true, true]);
        await client.chat.completions.create({ model: "m", messages });
        const spans = await h.spans(a!.rolloutId);
        expect(spans[1]!.attributes["agl.proxy.backend"]).toBe(urls[0]);
      } finally {
        await revived.close();
      }
    } finally {
      await h.close();
    }
  });
});

describe("rewrites", () => {
  it("warns once when a training call has temperature ≠ 1 with logprobs, not for validation calls", async () => {
    const h = await startHarness({ tap: false });
    try {
      const a = await h.newAttempt();
      const val = h.client(`${h.url}/proxy/rollout/${a.rolloutId}/attempt/${a.attemptId}/mode/val/openai/v1`);
      await val.chat.completions.create({ model: "m", messages });
      expect(h.warnings.filter((w) => w.includes("temperature"))).toEqual([]);
      const plain = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      await plain.chat.completions.create({ model: "m", messages, temperature: 0.6 });
      await plain.chat.completions.create({ model: "m", messages, temperature: 0.6 });
      expect(h.warnings.filter((w) => w.includes("temperature 0.6"))).toHaveLength(1);
      // the client's own logprob settings are kept
      await plain.chat.completions.create({ model: "m", messages, logprobs: true, top_logprobs: 3 });
      expect(h.mocks[0]!.requests.at(-1)!.body).toMatchObject({
        logprobs: true,
        top_logprobs: 3,
        return_token_ids: true,
        model: "policy",
      });
    } finally {
      await h.close();
    }
  });
});
