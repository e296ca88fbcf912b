import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const ADMIN = "admin-token-for-tests";
const LIMIT = 256 * 1024;
const anthropicMessage = { model: "m", max_tokens: 8, messages: [{ role: "user" as const, content: "hi" }] };

describe("errors before the request is parsed, hosted features, body limits, resume input", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ tap: false, proxy: { adminToken: ADMIN, maxBodyBytes: LIMIT } });
  });
  afterAll(() => h.close());

  const anthropic = (baseURL: string, apiKey: string) =>
    new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 10_000 });

  it("/v1/messages answers 401, 403, 404 unknown_attempt, 413 and malformed JSON in Anthropic's error shape", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const other = await h.newAttempt();
    const token = h.proxy.mintAttemptToken(rolloutId, attemptId);
    // the real SDK reads them as its typed errors, with Anthropic's error types
    await expect(anthropic(h.url, "not-a-token").messages.create(anthropicMessage)).rejects.toMatchObject({
      status: 401,
      error: { type: "error", error: { type: "authentication_error" } },
    });
    await expect(
      anthropic(`${h.url}/rollout/${other.rolloutId}/attempt/${other.attemptId}`, token).messages.create(
        anthropicMessage,
      ),
    ).rejects.toMatchObject({ status: 403, error: { type: "error", error: { type: "permission_error" } } });
    await expect(
      anthropic(`${h.url}/rollout/${rolloutId}/attempt/no-such-attempt`, ADMIN).messages.create(
        anthropicMessage,
      ),
    ).rejects.toMatchObject({
      status: 404,
      error: {
        type: "error",
        error: { type: "not_found_error", message: expect.stringContaining("no-such-attempt") },
      },
    });
    await expect(
      anthropic(h.url, token).messages.create({
        ...anthropicMessage,
        messages: [{ role: "user", content: "x".repeat(LIMIT) }],
      }),
    ).rejects.toMatchObject({ status: 413, error: { type: "error", error: { type: "request_too_large" } } });
    const malformed = await fetch(`${h.url}/v1/messages`, {
      method: "POST",
      headers: { "x-api-key": token, "content-type": "application/json" },
      body: "{not json",
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "request body is not valid JSON" },
    });
    // the other routes keep OpenAI's shape
    const chat = await fetch(`${h.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: "{not json",
    });
    expect((await chat.json()).error).toMatchObject({ type: "invalid_request_error", param: null });
  });

  it("hosted features outside tools are a 400 naming the field", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const token = h.proxy.mintAttemptToken(rolloutId, attemptId);
    const openai = h.client(`${h.url}/v1`, { apiKey: token });
    for (const [field, value] of [
      ["background", true],
      ["conversation", "conv_123"],
      ["conversation", { id: "conv_123" }],
      ["prompt", { id: "pmpt_1" }],
    ] as const) {
      await expect(
        openai.responses.create({ model: "m", input: "hi", [field]: value } as any),
      ).rejects.toMatchObject({ status: 400, param: field, message: expect.stringContaining(`${field}:`) });
    }
    // asking for nothing is fine
    const ok = await openai.responses.create({ model: "m", input: "hi", background: false } as any);
    expect(ok.status).toBe("completed");
    for (const [field, value] of [
      ["mcp_servers", [{ type: "url", url: "https://mcp.example", name: "x" }]],
      ["container", "container_1"],
    ] as const) {
      await expect(
        anthropic(h.url, token).messages.create({ ...anthropicMessage, [field]: value } as any),
      ).rejects.toMatchObject({
        status: 400,
        error: { error: { type: "invalid_request_error", message: expect.stringContaining(`${field}:`) } },
      });
    }
    expect(await h.spans(rolloutId)).toHaveLength(1);
  });

  it("a body over the limit: plain fetch reads the 413 every time (declared or chunked, LLM or control route)", async () => {
    const big = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(8 * LIMIT) }] });
    const routes = [
      { path: "/v1/chat/completions", shape: (b: any) => b.error.type === "invalid_request_error" },
      { path: "/v1/messages", shape: (b: any) => b.type === "error" && b.error.type === "request_too_large" },
      { path: "/proxy/pause", shape: (b: any) => b.detail === "request body too large" },
    ];
    const statuses: Array<number | string> = [];
    for (let i = 0; i < 30; i++) {
      const route = routes[i % routes.length]!;
      const chunked = i % 2 === 1;
      const body = chunked
        ? new ReadableStream({
            start(c) {
              for (let k = 0; k < 8; k++)
                c.enqueue(new TextEncoder().encode(big.slice(k * LIMIT, (k + 1) * LIMIT)));
              c.enqueue(new TextEncoder().encode(big.slice(8 * LIMIT)));
              c.close();
            },
          })
        : big;
      try {
        const r = await fetch(`${h.url}${route.path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
          body,
          ...(chunked ? { duplex: "half" } : {}),
        } as RequestInit);
        const json = await r.json();
        statuses.push(route.shape(json) ? r.status : `bad shape ${JSON.stringify(json)}`);
      } catch (error) {
        statuses.push(`${route.path}: ${(error as Error).message} ${(error as any).cause?.code ?? ""}`);
      }
    }
    expect(statuses).toEqual(Array(30).fill(413));
    // the proxy still serves
    const ok = await h.client(`${h.url}/v1`, { apiKey: ADMIN }).chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "after" }],
    });
    expect(ok.choices[0]!.message.content).toBe("Echo: after");
  });

  it("resume refuses a model_version no store can keep (NUL, lone surrogate), naming the field", async () => {
    for (const bad of ["v1\u0000", "v\ud800"]) {
      const r = await fetch(`${h.url}/proxy/resume`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ model_version: bad }),
      });
      expect(r.status).toBe(422);
      expect((await r.json()).detail[0].loc).toEqual(["body", "model_version"]);
      await expect(h.proxy.resume({ modelVersion: bad })).rejects.toThrow(/modelVersion/);
      expect(() => {
        h.proxy.modelVersion = bad;
      }).toThrow(/modelVersion/);
    }
    expect(h.proxy.modelVersion).toBeNull();
    // a good one is recorded on the next span, which the store accepts
    const r = await fetch(`${h.url}/proxy/resume`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN}` },
      body: JSON.stringify({ model_version: "v2 ü€" }),
    });
    expect(r.status).toBe(200);
    const { rolloutId, attemptId } = await h.newAttempt();
    await h
      .client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`, { apiKey: ADMIN })
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "v" }] });
    const [span] = await h.spans(rolloutId);
    expect(span!.attributes["agl.proxy.model_version"]).toBe("v2 ü€");
    expect(h.proxy.state().spans_failed).toBe(0);
  });
});
