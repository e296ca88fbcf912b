import {
  DEFAULT_SCOPED_TOKEN_TTL_SECONDS,
  type RolloutContext,
  Runner,
  ScopedTokenSigner,
  silentLogger,
} from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const ADMIN = "admin-token-0123456789";
const messages = [{ role: "user" as const, content: "hi" }];

interface Seen {
  rolloutId: string;
  attemptId: string;
  endpoint: string;
  apiKey: string | null;
  ownStatus: number;
  otherStatus: number;
}

/**
 * The runner mints per-attempt tokens from the proxy's secret without importing @agl/proxy; the real proxy
 * (llmAuth "token", the default once an admin token is set) must accept each for its own attempt only.
 */
describe("runner-minted scoped tokens against the real LLMProxy", () => {
  let h: Harness;
  let other: { rolloutId: string; attemptId: string };
  beforeAll(async () => {
    h = await startHarness({ proxy: { adminToken: ADMIN } });
    other = await h.newAttempt();
    await h.store.addResources({ main_llm: h.proxy.asResource({ model: "policy", apiKey: "shared-key" }) });
  });
  afterAll(() => h.close());

  const call = (url: string, apiKey: string | null) =>
    fetch(`${url}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey ?? ""}` },
      body: JSON.stringify({ model: "policy", messages }),
    });

  async function runWith(proxyTokenSecret: string | undefined, timeoutSeconds: number | null) {
    const seen: Seen[] = [];
    const agent = async (_task: unknown, { llm, rollout }: RolloutContext) => {
      const own = await call(llm!.endpoint, llm!.api_key);
      const otherUrl = `${h.url}/rollout/${other.rolloutId}/attempt/${other.attemptId}/v1`;
      const foreign = await call(otherUrl, llm!.api_key);
      seen.push({
        rolloutId: rollout.rollout_id,
        attemptId: rollout.attempt.attempt_id,
        endpoint: llm!.endpoint,
        apiKey: llm!.api_key,
        ownStatus: own.status,
        otherStatus: foreign.status,
      });
      return 1;
    };
    await h.store.enqueueManyRollouts([
      { input: { q: 1 }, config: { timeout_seconds: timeoutSeconds } },
      { input: { q: 2 }, config: { timeout_seconds: timeoutSeconds } },
    ]);
    const runner = new Runner({
      store: h.store,
      agent,
      concurrency: 2,
      maxRollouts: 2,
      pollIntervalMs: 5,
      logger: silentLogger,
      ...(proxyTokenSecret === undefined ? {} : { proxyTokenSecret }),
    });
    const summary = await runner.run();
    return { seen, summary };
  }

  it("gives each attempt a token the proxy accepts for it and rejects (403) for another attempt", async () => {
    const { seen, summary } = await runWith(h.proxy.tokenSecret, 30);
    expect(summary.succeeded).toBe(2);
    expect(seen).toHaveLength(2);
    for (const s of seen) {
      expect(s.endpoint).toBe(`${h.url}/rollout/${s.rolloutId}/attempt/${s.attemptId}/v1`);
      expect(s.apiKey).toMatch(/^agl1\./);
      expect(s.ownStatus).toBe(200);
      expect(s.otherStatus).toBe(403);
      const claims = new ScopedTokenSigner(h.proxy.tokenSecret).verify(s.apiKey!);
      expect(claims).toMatchObject({ rolloutId: s.rolloutId, attemptId: s.attemptId });
      // TTL = the rollout's timeout plus a clock-skew margin.
      const expected = Math.floor(Date.now() / 1000) + 30 + 60;
      expect(claims!.expiresAt).toBeGreaterThanOrEqual(expected - 5);
      expect(claims!.expiresAt).toBeLessThanOrEqual(expected);
      const spans = await h.spans(s.rolloutId);
      expect(spans.filter((x) => x.name.includes("chat")).map((x) => x.attempt_id)).toEqual([s.attemptId]);
    }
    expect(seen[0]!.apiKey).not.toBe(seen[1]!.apiKey);
    expect((await h.spans(other.rolloutId)).filter((x) => x.name.includes("chat"))).toHaveLength(0);
  });

  it("mints tokens with the default lifetime when the rollout has no timeout", async () => {
    const { seen } = await runWith(h.proxy.tokenSecret, null);
    for (const s of seen) {
      const expiresAt = new ScopedTokenSigner(h.proxy.tokenSecret).verify(s.apiKey!)!.expiresAt!;
      expect(Math.abs(expiresAt - (Date.now() / 1000 + DEFAULT_SCOPED_TOKEN_TTL_SECONDS))).toBeLessThan(10);
      expect(s.ownStatus).toBe(200);
    }
  });

  it("without a secret the agent keeps the resource's own key, which the proxy refuses (401)", async () => {
    const { seen } = await runWith(undefined, null);
    for (const s of seen) {
      expect(s.apiKey).toBe("shared-key");
      expect(s.ownStatus).toBe(401);
    }
  });

  it("tokens minted with another secret are refused (401)", async () => {
    const { seen } = await runWith("some-other-secret-0123456789", null);
    for (const s of seen) expect(s.ownStatus).toBe(401);
  });
});
