import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { httpAgent, LightningStoreClient, Worker } from "@agl/client";
import { findFinalReward, InMemoryLightningStore, llm, proxyLLM, rollout } from "@agl/core";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import type { StoreServer } from "@agl/store";
import OpenAI from "openai";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { serve } from "./support.js";

const silent = { debug() {}, info() {}, warn() {}, error() {} };
let store: InMemoryLightningStore;
let server: StoreServer;

beforeEach(async () => {
  store = new InMemoryLightningStore();
  server = await serve(store, { token: "tok" });
});
afterEach(async () => {
  await server.close();
  await store.close();
});

describe("Worker against a remote store", () => {
  it("runs N rollouts concurrently through the HTTP store and records rewards and spans", async () => {
    await store.addResources({ main: llm({ endpoint: "http://unused/v1", model: "m" }) });
    const ids = (await store.enqueueManyRollouts([1, 2, 3, 4, 5, 6].map((n) => ({ input: { n } })))).map(
      (r) => r.rollout_id,
    );
    let running = 0;
    let peak = 0;
    let started = 0;
    // The first three agents wait for each other (an event, not a sleep), so they provably overlap.
    let allThree!: () => void;
    const threeRunning = new Promise<void>((resolve) => {
      allThree = resolve;
    });
    const agent = rollout(async (task: { n: number }, { llm }) => {
      running++;
      started++;
      peak = Math.max(peak, running);
      if (running === 3) allThree();
      if (started <= 3) await threeRunning;
      running--;
      if (task.n === 4) throw new Error("agent failure");
      return task.n / 10 + (llm?.model === "m" ? 0 : 100);
    });
    const worker = new Worker({
      store: server.url,
      token: "tok",
      agent,
      concurrency: 3,
      pollIntervalMs: 20,
      maxRollouts: 6,
      handleSignals: false,
      logger: silent,
    });
    const summary = await worker.run();
    expect(summary).toMatchObject({ claimed: 6, succeeded: 5, failed: 1 });
    expect(peak).toBe(3);
    const finished = await store.waitForRollouts(ids, { timeoutSeconds: 0 });
    expect(finished).toHaveLength(6);
    for (const [i, id] of ids.entries()) {
      const r = await store.getRolloutById(id);
      expect(r?.status).toBe(i === 3 ? "failed" : "succeeded");
      if (i !== 3) {
        const spans = (await store.querySpans(id)).items;
        expect(findFinalReward(spans)).toBeCloseTo((i + 1) / 10);
      }
    }
  });

  it("stop() lets in-flight rollouts finish and claims nothing more", async () => {
    await store.addResources({ main: llm({ endpoint: "http://unused/v1", model: "m" }) });
    await store.enqueueManyRollouts(Array.from({ length: 10 }, (_, n) => ({ input: n })));
    let started = 0;
    let bothStarted!: () => void;
    const twoStarted = new Promise<void>((resolve) => {
      bothStarted = resolve;
    });
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const worker = new Worker({
      store: new LightningStoreClient({ url: server.url, token: "tok" }),
      agent: async () => {
        started++;
        if (started === 2) bothStarted();
        await released;
        return 1;
      },
      concurrency: 2,
      pollIntervalMs: 20,
      handleSignals: false,
      logger: silent,
    });
    const run = worker.run();
    // Stop while both slots are busy, then let the two in-flight rollouts finish.
    await twoStarted;
    worker.stop();
    release();
    const summary = await run;
    expect(summary.claimed).toBe(2);
    expect(summary.succeeded).toBe(2);
    expect(started).toBe(2);
    const queued = await store.queryRollouts({ statusIn: ["queuing"] });
    expect(queued.total).toBe(8);
  });
});

describe("httpAgent", () => {
  let llmServer: MockLLMServer;
  let service: Server;
  let serviceUrl: string;
  const received: any[] = [];

  beforeEach(async () => {
    received.length = 0;
    llmServer = await startMockLLMServer();
    // A small agent service in the verl recipe's style: it calls the LLM at the given base URL with the
    // trace id header and answers the reward.
    service = createServer((req, res) => {
      let raw = "";
      req.on("data", (c) => (raw += c));
      req.on("end", async () => {
        const body = JSON.parse(raw);
        received.push({ body, headers: req.headers });
        if (body.task.kind === "fail") {
          res
            .writeHead(500, { "content-type": "application/json" })
            .end(JSON.stringify({ detail: "agent crashed" }));
          return;
        }
        if (body.task.kind === "hang") return;
        if (body.task.kind === "garbage") {
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ score: 1 }));
          return;
        }
        const openai = new OpenAI({ baseURL: body.llm_base_url, apiKey: body.api_key ?? "none" });
        const reply = await openai.chat.completions.create(
          { model: body.model, messages: [{ role: "user", content: body.task.question }] },
          { headers: { trace_id: body.trace_id } },
        );
        const reward = reply.choices[0]!.message.content === `Echo: ${body.task.question}` ? 1 : 0;
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ reward }));
      });
    });
    await new Promise<void>((r) => service.listen(0, "127.0.0.1", r));
    serviceUrl = `http://127.0.0.1:${(service.address() as AddressInfo).port}/rollout`;
  });
  afterEach(async () => {
    service.closeAllConnections();
    await new Promise<void>((r) => service.close(() => r()));
    await llmServer.close();
  });

  it("posts task, attempt LLM URL and trace id; the reward lands in the store; failures fail the attempt", async () => {
    await store.addResources({
      main: proxyLLM({ endpoint: llmServer.baseURL, model: "mock", api_key: "k" }),
    });
    const ok = await store.enqueueRollout({ input: { kind: "ok", question: "hi" }, mode: "train" });
    const fail = await store.enqueueRollout({ input: { kind: "fail" } });
    const garbage = await store.enqueueRollout({ input: { kind: "garbage" } });
    // A generous deadline for the calls that answer (a loaded machine is slow), a short one for the
    // call that never answers, run by a second worker once the first is done.
    const workerWith = (timeoutMs: number, maxRollouts: number) =>
      new Worker({
        store: server.url,
        token: "tok",
        agent: httpAgent({ url: serviceUrl, timeoutMs }),
        concurrency: 4,
        pollIntervalMs: 20,
        maxRollouts,
        handleSignals: false,
        logger: silent,
      });
    expect(await workerWith(60_000, 3).run()).toMatchObject({ claimed: 3, succeeded: 1, failed: 2 });
    const hang = await store.enqueueRollout({ input: { kind: "hang" } });
    expect(await workerWith(300, 1).run()).toMatchObject({ claimed: 1, succeeded: 0, failed: 1 });

    const okAttempt = (await store.getLatestAttempt(ok.rollout_id))!;
    const sent = received.find((r) => r.body.rollout_id === ok.rollout_id)!;
    expect(sent.body).toMatchObject({
      task: { kind: "ok", question: "hi" },
      attempt_id: okAttempt.attempt_id,
      mode: "train",
      model: "mock",
      api_key: "k",
      // A ProxyLLM is resolved to this attempt's own URL.
      llm_base_url: `${llmServer.url}/rollout/${ok.rollout_id}/attempt/${okAttempt.attempt_id}/v1`,
    });
    expect(sent.body.trace_id).toMatch(/^[0-9a-f]{32}$/);
    expect(sent.headers.trace_id).toBe(sent.body.trace_id);
    const llmCall = llmServer.requests.find((r) => r.headers.trace_id === sent.body.trace_id)!;
    expect(llmCall.path).toBe(
      `/rollout/${ok.rollout_id}/attempt/${okAttempt.attempt_id}/v1/chat/completions`,
    );
    expect(findFinalReward((await store.querySpans(ok.rollout_id)).items)).toBe(1);

    for (const [r, message] of [
      [fail, /500.*agent crashed/],
      [hang, /timed out/],
      [garbage, /expected \{"reward"/],
    ] as const) {
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("failed");
      const attempt = await store.getLatestAttempt(r.rollout_id);
      expect(attempt?.metadata?.error?.type).toBe("HttpAgentError");
      expect(attempt?.metadata?.error?.message).toMatch(message);
    }
  });
});
