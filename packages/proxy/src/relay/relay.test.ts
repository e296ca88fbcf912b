import { createServer } from "node:net";
import { InMemoryLightningStore } from "@agl/core";
import { type MockLLMServer, mockDecode, mockEncode, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import type { LLMProxyOptions } from "../options.js";
import { LLMProxy } from "../proxy.js";
import { startRelayWorker } from "./relay-worker.js";

const TOKEN = "worker-token-0123456789";
const quiet = { warn: () => {}, error: () => {} };

/** Resources every test closes, last first. */
let cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

async function relayProxy(extra: Partial<LLMProxyOptions> = {}, port = 0) {
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = new LLMProxy({
    store,
    relay: { workerToken: TOKEN, waitForWorkerMs: 1_000 },
    model: "policy",
    port,
    healthCheckIntervalMs: 0,
    backoffBaseMs: 5,
    backoffMaxMs: 20,
    logger: quiet,
    ...extra,
  });
  const url = await proxy.start();
  cleanup.push(() => proxy.stop());
  const attempt = async () => {
    const r = await store.startRollout({ input: {} });
    return { rid: r.rollout_id, aid: r.attempt.attempt_id };
  };
  const client = (rid: string, aid: string) =>
    new OpenAI({
      baseURL: `${url}/rollout/${rid}/attempt/${aid}/v1`,
      apiKey: "x",
      maxRetries: 0,
      timeout: 10_000,
    });
  const spans = async (rid: string) => {
    await proxy.flush();
    return (await store.querySpans(rid)).items.sort((a, b) => a.sequence_id - b.sequence_id);
  };
  return { store, proxy, url, attempt, client, spans };
}

async function engine(options: Parameters<typeof startMockLLMServer>[0] = {}): Promise<MockLLMServer> {
  const m = await startMockLLMServer(options);
  cleanup.push(() => m.close());
  return m;
}

/** The LLM calls an engine served (workers also list its models). */
const calls = (m: MockLLMServer) => m.requests.filter((r) => r.path.endsWith("/chat/completions"));

async function worker(proxyUrl: string, upstream: MockLLMServer, workerId: string, token = TOKEN) {
  const w = startRelayWorker({
    proxy: proxyUrl.replace("http://", "ws://"),
    upstream: upstream.baseURL,
    token,
    workerId,
    backoffBaseMs: 20,
    backoffMaxMs: 100,
    logger: quiet,
  });
  cleanup.push(() => w.stop());
  return w;
}

const until = async (what: () => boolean, ms = 5_000) => {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
};

describe("relay mode: workers dial out to /ws/worker", () => {
  it("serves chat, streams and /v1/responses through a worker with exact token ids; announces models", async () => {
    const p = await relayProxy({ model: null });
    const e = await engine({ models: ["qwen-tiny"] });
    const w = await worker(p.url, e, "gpu-1");
    await w.ready;
    expect(p.proxy.relayWorkers).toEqual(["gpu-1"]);
    const models = await (await fetch(`${p.url}/v1/models`)).json();
    expect(models.data.map((m: any) => m.id)).toEqual(["qwen-tiny"]);

    const { rid, aid } = await p.attempt();
    const c = p.client(rid, aid);
    const plain: any = await c.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "héllo ü€" }],
    });
    expect(plain.choices[0].message.content).toBe("Echo: héllo ü€");
    let streamed = "";
    for await (const ch of await c.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "streamed ü€ text" }],
      stream: true,
    }))
      streamed += ch.choices[0]?.delta?.content ?? "";
    expect(streamed).toBe("Echo: streamed ü€ text");
    const resp = await c.responses.stream({ model: "m", input: "via responses" }).finalResponse();
    expect(resp.output_text).toBe("Echo: via responses");

    const spans = await p.spans(rid);
    expect(spans).toHaveLength(3);
    for (const [i, s] of spans.entries()) {
      const a = s.attributes as Record<string, any>;
      expect(a["agl.proxy.backend"]).toBe("relay://gpu-1/v1");
      expect(a["agl.proxy.status"]).toBe("ok");
      expect(a.prompt_token_ids).toEqual(mockEncode(JSON.stringify(calls(e)[i]!.body.messages)));
      expect(a["gen_ai.request.model"]).toBe("qwen-tiny");
    }
    expect(mockDecode(spans[1]!.attributes.response_token_ids as number[])).toBe("Echo: streamed ü€ text");
  });

  it("rollouts stick to one worker; a worker disconnecting mid-stream fails that call as a partial span, the next call fails over", async () => {
    const p = await relayProxy();
    const slow = { chunkDelayMs: 30, respond: () => ({ content: "a fairly long answer streamed slowly" }) };
    const e1 = await engine(slow);
    const e2 = await engine(slow);
    const w1 = await worker(p.url, e1, "w1");
    const w2 = await worker(p.url, e2, "w2");
    await Promise.all([w1.ready, w2.ready]);

    const { rid, aid } = await p.attempt();
    const c = p.client(rid, aid);
    for (let i = 0; i < 3; i++)
      await c.chat.completions.create({ model: "m", messages: [{ role: "user", content: `q${i}` }] });
    const counts = [calls(e1).length, calls(e2).length];
    expect(counts.sort()).toEqual([0, 3]);
    const [home, homeWorker, other] = calls(e1).length ? [e1, w1, e2] : [e2, w2, e1];

    const s = await c.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "go" }],
      stream: true,
    });
    const consumed = (async () => {
      for await (const _ of s) await homeWorker.stop();
    })();
    await expect(consumed).rejects.toThrow();
    const after = await c.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "again" }],
    });
    expect(after.choices[0]!.message.content).toBe("a fairly long answer streamed slowly");
    expect(calls(other).length).toBe(1);
    expect(calls(home).length).toBe(4);

    const spans = await p.spans(rid);
    expect(spans).toHaveLength(5);
    const broken = spans[3]!.attributes as Record<string, any>;
    expect(broken["agl.proxy.partial"]).toBe(true);
    expect(broken["agl.proxy.error"]).toMatch(/disconnected/);
    expect(spans[4]!.attributes["agl.proxy.backend"]).toBe(`relay://${other === e1 ? "w1" : "w2"}/v1`);
  });

  it("a non-streamed call on a worker that drops before answering is retried on another worker", async () => {
    const p = await relayProxy();
    // answers /models, never a completion
    const stuck = await engine({ respond: () => new Promise(() => {}) });
    const fine = await engine({});
    const ws = await worker(p.url, stuck, "stuck");
    await ws.ready;
    const { rid, aid } = await p.attempt();
    const call = p
      .client(rid, aid)
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
    await until(() => calls(stuck).length === 1);
    const wf = await worker(p.url, fine, "fine");
    await wf.ready;
    await ws.stop();
    const r = await call;
    expect(r.choices[0]!.message.content).toBe("Echo: x");
    const [span] = await p.spans(rid);
    expect(span!.attributes["agl.proxy.backend"]).toBe("relay://fine/v1");
    expect(span!.attributes["agl.proxy.retry_count"]).toBe(1);
  });

  it("workers reconnect with backoff until the proxy is up; calls wait for a worker, then 503 when none comes", async () => {
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const e = await engine({});
    const w = await worker(`http://127.0.0.1:${port}`, e, "late");
    await until(() => w.connections >= 2); // refused at least once, retried
    const p = await relayProxy({}, port);
    await w.ready;
    expect(w.connected).toBe(true);

    await w.stop();
    await until(() => p.proxy.relayWorkers.length === 0);
    const { rid, aid } = await p.attempt();
    const waiting = p
      .client(rid, aid)
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "w" }] });
    const w2 = await worker(p.url, e, "late");
    expect((await waiting).choices[0]!.message.content).toBe("Echo: w");
    await w2.stop();
    await until(() => p.proxy.relayWorkers.length === 0);
    await expect(
      p
        .client(rid, aid)
        .chat.completions.create({ model: "m", messages: [{ role: "user", content: "none" }] }),
    ).rejects.toMatchObject({ status: 503 });
    const spans = await p.spans(rid);
    expect(spans.map((s) => s.attributes["agl.proxy.http_status"])).toEqual([200, 503]);
    expect(spans[1]!.attributes["agl.proxy.error"]).toBe("no inference backend is connected");
  });

  it("a worker that stops answering pings is dropped and its call fails over", async () => {
    const p = await relayProxy({
      relay: { workerToken: TOKEN, waitForWorkerMs: 1_000, pingIntervalMs: 100 },
    });
    const e = await engine({});
    // a worker that says hello and then goes silent (a dead NAT mapping): its socket is paused
    const silent = new WebSocket(`${p.url.replace("http", "ws")}/ws/worker`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    cleanup.push(async () => silent.terminate());
    await new Promise((r) => silent.once("open", r));
    silent.send(JSON.stringify({ type: "hello", protocol: 1, worker_id: "silent", models: ["m"] }));
    await until(() => p.proxy.relayWorkers.includes("silent"));
    const { rid, aid } = await p.attempt();
    const call = p
      .client(rid, aid)
      .chat.completions.create({ model: "m", messages: [{ role: "user", content: "hb" }] });
    await new Promise<void>((r) =>
      silent.on("message", (d) => String(d).includes('"type":"request"') && r()),
    ); // the request reached it
    const w = await worker(p.url, e, "alive");
    await w.ready;
    (silent as any)._socket.pause();
    expect((await call).choices[0]!.message.content).toBe("Echo: hb");
    expect(p.proxy.relayWorkers).toEqual(["alive"]);
    const [span] = await p.spans(rid);
    expect(span!.attributes["agl.proxy.backend"]).toBe("relay://alive/v1");
  });

  it("refuses workers without the worker token and plain requests to other upgrade paths", async () => {
    const p = await relayProxy();
    const e = await engine({});
    const bad = await worker(p.url, e, "intruder", "wrong-token-0123456789");
    await until(() => bad.connections >= 2);
    expect(p.proxy.relayWorkers).toEqual([]);
    expect(bad.connected).toBe(false);
  });
});
