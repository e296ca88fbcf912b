/**
 * A relay worker (the real `agl-relay-worker` process) SIGKILLed and restarted again and again while agents
 * keep calling through the proxy: every call that had not started streaming when its worker died must be
 * retried once the worker is back, so clients see no error at all.
 */
import { InMemoryLightningStore } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { type Child, spawnTs } from "../store-http/processes.js";
import { FULL, report } from "./config.js";

const TOKEN = "relay-restart-token-0123456789";
const RELAY = FULL ? { kills: 20, clients: 8 } : { kills: 3, clients: 6 };

/** Resolves once `what()` holds (checked every 20 ms); the timeout is only a safety net. */
async function until(what: () => boolean, label: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("relay: a worker killed and restarted during calls", () => {
  it("0 client-visible errors for calls that had not started streaming", async () => {
    // Every answer takes a while, so calls are always in flight on the worker when it is killed.
    const mock = await startMockLLMServer({ delayMs: 150, chunkDelayMs: 5 });
    const store = new InMemoryLightningStore({ watchdog: false });
    const proxy = new LLMProxy({
      store,
      relay: { workerToken: TOKEN, waitForWorkerMs: 60_000 },
      model: "policy",
      healthCheckIntervalMs: 0,
      logger: { warn() {}, error() {} },
    });
    const url = await proxy.start();
    let worker: Child | null = null;
    const spawnWorker = () =>
      spawnTs(
        "packages/proxy/src/relay-worker-cli.ts",
        [
          "--proxy",
          url.replace("http://", "ws://"),
          "--upstream",
          mock.baseURL,
          "--worker-id",
          "gpu-0",
          "--model",
          "policy",
        ],
        { AGL_RELAY_WORKER_TOKEN: TOKEN },
      );
    let stop = false;
    const counts = { ok: 0, failedBeforeStreaming: 0, failedWhileStreaming: 0 };
    const failures: string[] = [];
    try {
      worker = spawnWorker();
      await until(() => proxy.relayWorkers.includes("gpu-0"), "the worker to connect");
      const r = await store.startRollout({ input: {} });
      const rollout = r.rollout_id;
      const agent = async (n: number) => {
        const client = new OpenAI({
          baseURL: `${url}/rollout/${rollout}/attempt/${r.attempt.attempt_id}/v1`,
          apiKey: "x",
          maxRetries: 0,
          timeout: 120_000,
        });
        for (let i = 0; !stop; i++) {
          const content = `agent ${n} call ${i}`;
          let streaming = false;
          try {
            if (i % 2 === 0) {
              const c = await client.chat.completions.create({
                model: "m",
                messages: [{ role: "user", content }],
              });
              expect(c.choices[0]!.message.content).toBe(`Echo: ${content}`);
            } else {
              let text = "";
              const s = await client.chat.completions.create({
                model: "m",
                messages: [{ role: "user", content }],
                stream: true,
              });
              // the answer has started (status and headers sent): from here a dead worker is a broken stream
              streaming = true;
              for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
              expect(text).toBe(`Echo: ${content}`);
            }
            counts.ok++;
          } catch (error) {
            if (streaming) counts.failedWhileStreaming++;
            else {
              counts.failedBeforeStreaming++;
              failures.push((error as Error).message);
            }
          }
        }
      };
      const agents = Array.from({ length: RELAY.clients }, (_, n) => agent(n));
      for (let k = 0; k < RELAY.kills; k++) {
        // some calls done since the last restart, and some on the engine right now
        const done = counts.ok;
        await until(() => counts.ok >= done + RELAY.clients, "calls to complete");
        const seen = mock.requests.length;
        await until(() => mock.requests.length > seen, "a call to reach the engine");
        worker.proc.kill("SIGKILL");
        await worker.exited;
        await until(() => proxy.relayWorkers.length === 0, "the proxy to notice the dead worker");
        // a restart takes seconds (process start, reconnect): longer than the proxy's retries take
        await new Promise((r) => setTimeout(r, 2_000));
        worker = spawnWorker();
        await until(() => proxy.relayWorkers.includes("gpu-0"), "the worker to reconnect");
      }
      const done = counts.ok;
      await until(() => counts.ok >= done + RELAY.clients, "calls after the last restart");
      stop = true;
      await Promise.all(agents);
      await proxy.flush();
      const spans = (await store.querySpans(rollout)).items;
      const retried = spans.filter((s) => Number(s.attributes["agl.proxy.retry_count"]) > 0).length;
      await report("relay-restart", { ...counts, kills: RELAY.kills, retriedCalls: retried });
      expect(failures).toEqual([]);
      expect(counts.failedBeforeStreaming).toBe(0);
      // the kills did hit calls in flight, which were retried on the restarted worker
      expect(retried).toBeGreaterThanOrEqual(RELAY.kills);
      expect(spans.length).toBe(counts.ok + counts.failedWhileStreaming);
    } finally {
      stop = true;
      if (worker) {
        worker.proc.kill("SIGKILL");
        await worker.exited;
      }
      await proxy.stop();
      await mock.close();
      await store.close();
    }
  }, 600_000);
});
