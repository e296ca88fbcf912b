import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

describe("SSE passthrough", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ mocks: [{ chunkDelayMs: 40 }] });
  });
  afterAll(() => h.close());

  it("relays each event as the upstream sends it, not after the stream ends", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    const before = h.taps[0]!.exchanges.length;
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "a message long enough for several chunks" }],
      stream: true,
    });
    const upstreamSoFar: string[] = [];
    for await (const _ of stream) upstreamSoFar.push(h.taps[0]!.exchanges[before]!.responseBody);
    // when the client saw its first chunks, the upstream was still generating
    expect(upstreamSoFar[0]).not.toContain("[DONE]");
    expect(upstreamSoFar[2]).not.toContain("[DONE]");
    expect(upstreamSoFar.length).toBeGreaterThan(5);
    const [span] = await h.spans(rolloutId);
    expect(span!.attributes["agl.proxy.partial"]).toBe(false);
    expect(span!.attributes["agl.proxy.ttft_ms"] as number).toBeLessThan(
      span!.attributes["agl.proxy.latency_ms"] as number,
    );
  });

  it("passes an upstream error status on a streamed call through as JSON", async () => {
    const failing = await startHarness({ mocks: [{ failFirst: 10 }], proxy: { retries: 0 } });
    try {
      const { rolloutId, attemptId } = await failing.newAttempt();
      const client = failing.client(`${failing.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      await expect(
        client.chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "x" }],
          stream: true,
        }),
      ).rejects.toMatchObject({ status: 500 });
      const [span] = await failing.spans(rolloutId);
      expect(span!.attributes).toMatchObject({
        "agl.proxy.http_status": 500,
        "agl.proxy.status": "error",
        "agl.proxy.stream": true,
      });
    } finally {
      await failing.close();
    }
  });
});

describe("SSE keepalive", () => {
  it("sends comments on a silent stream, between events only, and the SDK ignores them", async () => {
    const h = await startHarness({ mocks: [{ chunkDelayMs: 120 }], proxy: { sseKeepAliveMs: 40 } });
    try {
      const { rolloutId, attemptId } = await h.newAttempt();
      const res = await fetch(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          messages: [{ role: "user", content: "hello there" }],
          stream: true,
        }),
      });
      const text = await res.text();
      expect(text).toContain(": keepalive\n\n");
      // every keepalive sits between complete events
      for (const block of text.split("\n\n").filter(Boolean)) {
        expect(block === ": keepalive" || block.startsWith("data: ")).toBe(true);
      }
      const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      let content = "";
      for await (const chunk of await client.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
        stream: true,
      })) {
        content += chunk.choices[0]?.delta.content ?? "";
      }
      expect(content).toBe("Echo: hi");
    } finally {
      await h.close();
    }
  });
});
