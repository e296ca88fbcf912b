import { mockEncode } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

describe("attribution styles", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness();
  });
  afterAll(() => h.close());

  const messages = [{ role: "user" as const, content: "ping" }];

  /** Runs one streamed and one plain call with the client, and checks both spans against the upstream bytes. */
  async function expectRecorded(
    client: ReturnType<Harness["client"]>,
    rolloutId: string,
    attemptId: string,
    style: string,
    extra: Record<string, unknown> = {},
  ) {
    const tapBefore = h.taps[0]!.exchanges.length;
    await client.chat.completions.create({ model: "m", messages });
    for await (const _ of await client.chat.completions.create({ model: "m", messages, stream: true }));
    const spans = await h.spans(rolloutId);
    expect(spans).toHaveLength(2);
    const plainUpstream = JSON.parse(h.taps[0]!.exchanges[tapBefore]!.responseBody);
    for (const span of spans) {
      expect(span.attempt_id).toBe(attemptId);
      expect(span.attributes).toMatchObject({ "agl.proxy.attribution": style, ...extra });
      expect(span.attributes.prompt_token_ids).toEqual(plainUpstream.prompt_token_ids);
      expect(span.attributes.response_token_ids).toEqual(plainUpstream.choices[0].token_ids);
      expect(span.attributes.response_token_ids).toEqual(mockEncode("Echo: ping"));
      expect(span.attributes["agl.proxy.status"]).toBe("ok");
    }
    expect(spans.map((s) => s.sequence_id)).toEqual([1, 2]);
    return spans;
  }

  it("v0.x path prefix /rollout/{rid}/attempt/{aid}/v1 (what a ProxyLLM resolves to)", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const { resolveForAttempt } = await import("@agl/core");
    const llm = resolveForAttempt(h.proxy.asResource({ model: "policy" }), rolloutId, attemptId);
    expect(llm.endpoint).toBe(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    await expectRecorded(h.client(llm.endpoint), rolloutId, attemptId, "path");
  });

  it("v0.x path prefix without /v1 (ProxyLLM endpoint given without it)", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    await expectRecorded(
      h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}`),
      rolloutId,
      attemptId,
      "path",
    );
  });

  it("v1.0 path /proxy/rollout/{rid}/attempt/{aid}/mode/{train|val}/openai/v1 with its rewrites", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const base = `${h.url}/proxy/rollout/${rolloutId}/attempt/${attemptId}/mode/train/openai/v1`;
    await expectRecorded(h.client(base), rolloutId, attemptId, "proxy_path", {
      "agl.proxy.mode": "train",
      "gen_ai.request.temperature": 1,
    });
    const val = await h.newAttempt();
    const before = h.taps[0]!.exchanges.length;
    await h
      .client(`${h.url}/proxy/rollout/${val.rolloutId}/attempt/${val.attemptId}/mode/val/openai/v1`)
      .chat.completions.create({ model: "m", messages, temperature: 0.2 });
    const sent = JSON.parse(h.taps[0]!.exchanges[before]!.requestBody);
    expect(sent.temperature).toBe(0.7);
    expect(sent.logprobs).toBeUndefined();
    expect(sent.return_token_ids).toBe(true);
    const bad = await fetch(`${h.url}/proxy/rollout/r/attempt/a/mode/test/openai/v1/chat/completions`, {
      method: "POST",
      body: "{}",
    });
    expect(bad.status).toBe(404);
  });

  it("headers x-rollout-id / x-attempt-id", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/v1`, {
      headers: { "x-rollout-id": rolloutId, "x-attempt-id": attemptId },
    });
    await expectRecorded(client, rolloutId, attemptId, "header");
    const one = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "x-rollout-id": rolloutId, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages }),
    });
    expect(one.status).toBe(400);
  });

  it("trace header (verl recipe 003), bound to an attempt through a session or used as the rollout id", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    h.proxy.createSession("trace-abc", { rolloutId, attemptId });
    const client = h.client(`${h.url}/v1`, { headers: { trace_id: "trace-abc" } });
    await expectRecorded(client, rolloutId, attemptId, "trace_header");
  });

  it("verl PR #83 sessions: POST/GET/complete/DELETE and the /{session}/v1 base URL", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const created = await fetch(`${h.url}/sessions/trial-1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ rollout_id: rolloutId, attempt_id: attemptId }),
    });
    expect(await created.json()).toMatchObject({
      session_id: "trial-1",
      status: "created",
      rollout_id: rolloutId,
    });
    await expectRecorded(h.client(`${h.url}/trial-1/v1`), rolloutId, attemptId, "session", {
      "agl.proxy.session_id": "trial-1",
    });
    // the alternate form /v1/chat/completions/{session}
    const alt = await fetch(`${h.url}/v1/chat/completions/trial-1`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "again" }] }),
    });
    expect(alt.status).toBe(200);
    await h.proxy.flush();
    await fetch(`${h.url}/sessions/trial-1/complete`, { method: "POST" });
    const record = await (await fetch(`${h.url}/sessions/trial-1`)).json();
    expect(record.completed).toBe(true);
    expect(record.turns).toHaveLength(3);
    expect(record.turns[0]).toMatchObject({
      request_messages: messages,
      completion_text: "Echo: ping",
      completion_token_ids: mockEncode("Echo: ping"),
      finish_reason: "stop",
      prompt_token_ids: mockEncode(JSON.stringify(messages)),
    });
    expect(record.turns[0].completion_logprobs).toHaveLength("Echo: ping".length);
    expect(record.turns[1]).toEqual(record.turns[0]);
    expect(record.turns[2].completion_text).toBe("Echo: again");
    expect((await fetch(`${h.url}/sessions/trial-1`, { method: "DELETE" })).status).toBe(200);
    expect((await fetch(`${h.url}/sessions/trial-1`)).status).toBe(404);
  });

  it("GET /v1/models under every base URL, and /health", async () => {
    for (const base of [
      `${h.url}/v1`,
      `${h.url}/rollout/r1/attempt/a1/v1`,
      `${h.url}/proxy/rollout/r/attempt/a/mode/val/openai/v1`,
      `${h.url}/s1/v1`,
    ]) {
      const models = await h.client(base).models.list();
      expect(models.data.map((m) => m.id)).toEqual(["policy"]);
    }
    const health = await (await fetch(`${h.url}/health`)).json();
    expect(health).toMatchObject({ status: "ok", paused: false, inflight: 0 });
    expect(health.backends).toHaveLength(1);
  });

  it("unattributed calls are forwarded without a span, or rejected when configured", async () => {
    const out = await h.client(`${h.url}/v1`).chat.completions.create({ model: "m", messages });
    expect(out.choices[0]!.message.content).toBe("Echo: ping");
    const strict = await startHarness({ proxy: { unattributed: "reject" }, tap: false });
    try {
      await expect(
        strict.client(`${strict.url}/v1`).chat.completions.create({ model: "m", messages }),
      ).rejects.toMatchObject({
        status: 400,
      });
    } finally {
      await strict.close();
    }
  });
});
