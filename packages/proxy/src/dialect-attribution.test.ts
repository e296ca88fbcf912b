import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { matchLLMRoute } from "./routes.js";
import { type Harness, startHarness } from "./test-support/harness.js";

const bodies = {
  responses: { model: "m", input: "hi" },
  messages: { model: "m", max_tokens: 16, messages: [{ role: "user", content: "hi" }] },
};

describe("attribution, tokens and pause on /v1/responses and /v1/messages", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ proxy: { adminToken: "admin-token-xyz", traceHeader: "trace_id" } });
  });
  afterAll(() => h.close());

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${h.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": "admin-token-xyz", ...headers },
      body: JSON.stringify(body),
    });

  it("routes match every attribution prefix", () => {
    expect(matchLLMRoute("/rollout/r/attempt/a/v1/responses")).toMatchObject({
      op: "responses",
      style: "path",
    });
    expect(matchLLMRoute("/proxy/rollout/r/attempt/a/mode/val/openai/v1/messages")).toMatchObject({
      op: "messages",
      mode: "val",
      style: "proxy_path",
    });
    expect(matchLLMRoute("/s1/v1/messages")).toMatchObject({ op: "messages", sessionId: "s1" });
    expect(matchLLMRoute("/v1/responses")).toEqual({ op: "responses" });
    expect(matchLLMRoute("/v1/responses/x")).toBeNull();
  });

  for (const api of ["responses", "messages"] as const) {
    it(`${api}: path, v1.0 path (mode rewrites), session, headers, trace header and token all attribute`, async () => {
      const cases: Array<{
        style: string;
        path: (rid: string, aid: string) => string;
        headers?: (rid: string, aid: string) => Record<string, string>;
      }> = [
        { style: "path", path: (r, a) => `/rollout/${r}/attempt/${a}/v1/${api}` },
        { style: "proxy_path", path: (r, a) => `/proxy/rollout/${r}/attempt/${a}/mode/val/openai/v1/${api}` },
        {
          style: "header",
          path: () => `/v1/${api}`,
          headers: (r, a) => ({ "x-rollout-id": r, "x-attempt-id": a }),
        },
        {
          style: "token",
          path: () => `/v1/${api}`,
          headers: (r, a) => ({ "x-api-key": h.proxy.mintAttemptToken(r, a) }),
        },
        { style: "session", path: (r) => `/sess-${api}-${r}/v1/${api}` },
        {
          style: "trace_header",
          path: () => `/v1/${api}`,
          headers: (r) => ({ trace_id: `trace-${api}-${r}` }),
        },
      ];
      for (const c of cases) {
        const { rolloutId, attemptId } = await h.newAttempt();
        h.proxy.createSession(`sess-${api}-${rolloutId}`, { rolloutId, attemptId });
        h.proxy.createSession(`trace-${api}-${rolloutId}`, { rolloutId, attemptId });
        const before = h.taps[0]!.exchanges.length;
        const res = await post(c.path(rolloutId, attemptId), bodies[api], c.headers?.(rolloutId, attemptId));
        expect(res.status, c.style).toBe(200);
        const spans = await h.spans(rolloutId);
        expect(spans, c.style).toHaveLength(1);
        const a = spans[0]!.attributes;
        expect(a["agl.proxy.attribution"]).toBe(c.style);
        expect(a["agl.proxy.client_api"]).toBe(api);
        expect(a.prompt_token_ids).toBeInstanceOf(Array);
        const sent = JSON.parse(h.taps[0]!.exchanges[before]!.requestBody);
        // the v1.0 val mode forces its temperature and drops logprob injection
        if (c.style === "proxy_path")
          expect(sent).toMatchObject({ temperature: 0.7, return_token_ids: true });
        else expect(sent).toMatchObject({ logprobs: true, return_token_ids: true });
      }
    });

    it(`${api}: unknown attempts are 404, wrong-attempt tokens 403, paused calls 429`, async () => {
      expect((await post(`/rollout/nope/attempt/nope/v1/${api}`, bodies[api])).status).toBe(404);
      const a = await h.newAttempt();
      const b = await h.newAttempt();
      const forbidden = await post(`/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/${api}`, bodies[api], {
        "x-api-key": h.proxy.mintAttemptToken(b.rolloutId, b.attemptId),
      });
      expect(forbidden.status).toBe(403);
      await h.proxy.pause({ mode: "reject", retryAfterSeconds: 2 });
      try {
        const paused = await post(`/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/${api}`, bodies[api]);
        expect(paused.status).toBe(429);
        expect(paused.headers.get("retry-after")).toBe("2");
      } finally {
        await h.proxy.resume();
      }
    });
  }
});
