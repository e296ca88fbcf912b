import { mockEncode } from "@agl/core/mock-llm";
import { until } from "@agl/core/testing";
import { describe, expect, it } from "vitest";
import { rendezvousScore } from "./backends.js";
import { type Harness, startHarness } from "./test-support/harness.js";

const messages = [{ role: "user" as const, content: "a fairly long question to stream back in pieces" }];

/** An attempt whose rollout the rendezvous hash sends to backend `index` first. */
async function attemptPreferring(h: Harness, index: number) {
  const urls = h.taps.map((t) => `${t.url}/v1`);
  for (let i = 0; i < 200; i++) {
    const a = await h.newAttempt();
    const scores = urls.map((u) => rendezvousScore(a.rolloutId, { hashSeed: u, weight: 1 }));
    if (scores.indexOf(Math.max(...scores)) === index) return a;
  }
  throw new Error("no rollout id hashed to the wanted backend");
}

describe("faults", () => {
  it("fails over to another backend when one returns 500s; sticky routing keeps rollouts on one backend", async () => {
    const h = await startHarness({ mocks: [{ failFirst: 1_000 }, {}] });
    try {
      const a = await attemptPreferring(h, 0);
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      const out = await client.chat.completions.create({ model: "m", messages });
      expect(out.choices[0]!.message.content).toContain("Echo:");
      const [span] = await h.spans(a.rolloutId);
      expect(span!.attributes).toMatchObject({
        "agl.proxy.retry_count": 1,
        "agl.proxy.backend": `${h.taps[1]!.url}/v1`,
        "agl.proxy.status": "ok",
      });
      expect(h.mocks[0]!.requests.length).toBe(1);
      // a rollout preferring the healthy backend never touches the failing one, call after call
      const b = await attemptPreferring(h, 1);
      const before = h.mocks[0]!.requests.length;
      const cb = h.client(`${h.url}/rollout/${b.rolloutId}/attempt/${b.attemptId}/v1`);
      for (let i = 0; i < 3; i++) await cb.chat.completions.create({ model: "m", messages });
      expect(h.mocks[0]!.requests.length).toBe(before);
    } finally {
      await h.close();
    }
  });

  it("sends each backend its own model name on failover (first 500s, second serves another name)", async () => {
    const h = await startHarness({
      mocks: [{ failFirst: 1_000 }, {}],
      backendModels: ["model-a", "model-b"],
    });
    try {
      const a = await attemptPreferring(h, 0);
      const out = await h
        .client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`)
        .chat.completions.create({ model: "client-name", messages });
      expect(out.choices[0]!.message.content).toContain("Echo:");
      expect(h.mocks[0]!.requests.map((r) => r.body.model)).toEqual(["model-a"]);
      expect(h.mocks[1]!.requests.map((r) => r.body.model)).toEqual(["model-b"]);
      const [span] = await h.spans(a.rolloutId);
      expect(span!.attributes).toMatchObject({
        "agl.proxy.retry_count": 1,
        "agl.proxy.backend": `${h.taps[1]!.url}/v1`,
        "gen_ai.request.model": "model-b",
        "agl.proxy.client_model": "client-name",
      });
      // the recorded request is the exact body the answering backend got
      expect(span!.attributes["agl.proxy.request"]).toBe(h.taps[1]!.exchanges[0]!.requestBody);
    } finally {
      await h.close();
    }
  });

  it("returns the upstream's error (and records it) once retries are exhausted", async () => {
    const h = await startHarness({ mocks: [{ failFirst: 1_000 }], proxy: { retries: 2 } });
    try {
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      await expect(client.chat.completions.create({ model: "m", messages })).rejects.toMatchObject({
        status: 500,
      });
      expect(h.mocks[0]!.requests.length).toBe(3);
      const [span] = await h.spans(a.rolloutId);
      expect(span!.status.status_code).toBe("ERROR");
      expect(span!.attributes).toMatchObject({
        "agl.proxy.http_status": 500,
        "agl.proxy.status": "error",
        "agl.proxy.retry_count": 2,
      });
    } finally {
      await h.close();
    }
  });

  it("times out a hung upstream: 504 alone, failover when another backend is healthy", async () => {
    const h = await startHarness({ mocks: [{ hang: true }], proxy: { timeoutMs: 200, retries: 0 } });
    try {
      const a = await h.newAttempt();
      const t0 = Date.now();
      await expect(
        h
          .client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`)
          .chat.completions.create({ model: "m", messages }),
      ).rejects.toMatchObject({ status: 504 });
      // The upstream never answers: only the 200 ms timeout ends the call (load only adds latency).
      expect(Date.now() - t0).toBeLessThan(20_000);
      const [span] = await h.spans(a.rolloutId);
      expect(span!.attributes).toMatchObject({ "agl.proxy.http_status": 504, "agl.proxy.status": "error" });
      expect(String(span!.attributes["agl.proxy.error"])).toMatch(/200 ms/);
    } finally {
      await h.close();
    }
    const h2 = await startHarness({ mocks: [{ hang: true }, {}], proxy: { timeoutMs: 200, retries: 1 } });
    try {
      const a = await attemptPreferring(h2, 0);
      const out = await h2
        .client(`${h2.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`)
        .chat.completions.create({ model: "m", messages });
      expect(out.choices[0]!.message.content).toContain("Echo:");
      const [span] = await h2.spans(a.rolloutId);
      expect(span!.attributes["agl.proxy.retry_count"]).toBe(1);
    } finally {
      await h2.close();
    }
  });

  it("records the partial call when the upstream dies mid-stream, and the client sees an error", async () => {
    const h = await startHarness({ mocks: [{ dieAfterChunks: 4, chunkDelayMs: 5 }], proxy: { retries: 0 } });
    try {
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      const received: number[] = [];
      await expect(
        (async () => {
          for await (const chunk of await client.chat.completions.create({
            model: "m",
            messages,
            stream: true,
          })) {
            received.push(...((chunk.choices[0] as any)?.token_ids ?? []));
          }
        })(),
      ).rejects.toThrow();
      const [span] = await h.spans(a.rolloutId);
      const full = mockEncode(`Echo: ${messages[0]!.content}`);
      // role chunk + 3 content chunks of 4 characters
      expect(span!.attributes.response_token_ids).toEqual(full.slice(0, 12));
      expect(received).toEqual(full.slice(0, 12));
      expect(span!.attributes.prompt_token_ids).toEqual(
        mockEncode(JSON.stringify(JSON.parse(h.taps[0]!.exchanges[0]!.requestBody).messages)),
      );
      expect(span!.attributes).toMatchObject({
        "agl.proxy.partial": true,
        "agl.proxy.status": "error",
        "agl.proxy.stream": true,
      });
      expect(span!.status.status_code).toBe("ERROR");
    } finally {
      await h.close();
    }
  });

  it("records the partial call when the client disconnects mid-stream, and aborts the upstream", async () => {
    const h = await startHarness({ mocks: [{ chunkDelayMs: 30 }] });
    try {
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      const stream = await client.chat.completions.create({ model: "m", messages, stream: true });
      let chunks = 0;
      for await (const _ of stream) {
        if (++chunks === 3) break; // breaking out of the iterator aborts the HTTP request
      }
      await until(async () => (await h.spans(a.rolloutId)).length > 0);
      const [span] = await h.spans(a.rolloutId);
      expect(span!.attributes).toMatchObject({
        "agl.proxy.partial": true,
        "agl.proxy.error": "client disconnected",
      });
      const ids = span!.attributes.response_token_ids as number[];
      expect(ids.length).toBeGreaterThan(0);
      expect(ids).toEqual(mockEncode(`Echo: ${messages[0]!.content}`).slice(0, ids.length));
      // the upstream was cut off too: its stream never completed
      expect(h.taps[0]!.exchanges[0]!.responseBody).not.toContain("[DONE]");
      expect(h.proxy.state().inflight).toBe(0);
    } finally {
      await h.close();
    }
  });

  it("records a non-streamed call whose client disconnects before the answer, flagged partial", async () => {
    const h = await startHarness({ mocks: [{ delayMs: 1000 }] });
    try {
      const a = await h.newAttempt();
      const abort = new AbortController();
      const call = fetch(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages }),
        signal: abort.signal,
      });
      await until(() => h.proxy.state().inflight === 1);
      abort.abort();
      await expect(call).rejects.toThrow();
      await until(async () => (await h.spans(a.rolloutId)).length > 0);
      const [span] = await h.spans(a.rolloutId);
      expect(span!.attributes).toMatchObject({
        "agl.proxy.stream": false,
        "agl.proxy.partial": true,
        "agl.proxy.status": "error",
        "agl.proxy.error": "client disconnected",
      });
      expect(span!.status.status_code).toBe("ERROR");
      expect(h.proxy.state().inflight).toBe(0);
    } finally {
      await h.close();
    }
  });
});
