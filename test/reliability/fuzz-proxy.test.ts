import { InMemoryLightningStore } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { describe, expect, it } from "vitest";
import { spawnTs } from "../store-http/processes.js";
import { FUZZ, report } from "./config.js";
import { fuzzHttp, type Route, warmUp } from "./http-fuzz.js";
import { MiB, rssBytes, settledRss, watchRss } from "./rss.js";

const chat = {
  model: "m",
  messages: [
    { role: "system", content: "be brief" },
    { role: "user", content: "hi" },
  ],
  max_tokens: 8,
  temperature: 0.5,
};
const streamed = { ...chat, stream: true, stream_options: { include_usage: true } };
const completion = { model: "m", prompt: "2+2=", max_tokens: 4 };

/** The proxy's LLM routes (plain, attributed by path, v1 gateway, session) and its control routes. */
const ROUTES: Route[] = [
  { method: "POST", path: "/v1/chat/completions", body: chat },
  { method: "POST", path: "/v1/chat/completions", body: streamed },
  { method: "POST", path: "/v1/completions", body: completion },
  { method: "GET", path: "/v1/models" },
  { method: "POST", path: "/rollout/:rid/attempt/:aid/v1/chat/completions", body: chat },
  { method: "POST", path: "/rollout/:rid/attempt/:aid/v1/chat/completions", body: streamed },
  { method: "POST", path: "/rollout/:rid/attempt/:aid/v1/completions", body: completion },
  {
    method: "POST",
    path: "/proxy/rollout/:rid/attempt/:aid/mode/train/openai/v1/chat/completions",
    body: chat,
  },
  { method: "POST", path: "/:sid/v1/chat/completions", body: chat },
  {
    method: "POST",
    path: "/rollout/:rid/attempt/:aid/v1/responses",
    body: { model: "m", instructions: "be brief", input: [{ role: "user", content: "hi" }], store: true },
  },
  {
    method: "POST",
    path: "/v1/messages",
    body: { model: "m", max_tokens: 8, messages: [{ role: "user", content: "hi" }] },
  },
  { method: "POST", path: "/v1/embeddings", body: { input: "x" } },
  { method: "GET", path: "/health" },
  { method: "GET", path: "/healthz" },
  { method: "GET", path: "/proxy/state" },
  { method: "POST", path: "/proxy/pause", body: { reason: "fuzz", mode: "reject" } },
  { method: "POST", path: "/proxy/resume", body: {} },
  {
    method: "POST",
    path: "/proxy/tokens",
    body: { rollout_id: ":rid", attempt_id: ":aid", ttl_seconds: 60 },
  },
  { method: "POST", path: "/sessions/:sid", body: { rollout_id: ":rid", attempt_id: ":aid" } },
  { method: "GET", path: "/sessions/:sid" },
  { method: "POST", path: "/sessions/:sid/complete", body: {} },
  { method: "DELETE", path: "/sessions/:sid" },
];

describe("HTTP fuzz of agl-proxy (seeded; AGL_FUZZ_SEED replays)", () => {
  it("no undocumented 5xx, no hang, peak memory bounded, back under 1.5x idle", async () => {
    const mock = await startMockLLMServer();
    const child = spawnTs(
      "packages/proxy/src/cli.ts",
      [
        "--store",
        "memory:",
        "--backend",
        `${mock.url}/v1`,
        "--port",
        "0",
        "--retries",
        "0",
        "--timeout-ms",
        "5000",
      ],
      { AGL_LOG_LEVEL: "info" },
    );
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`agl-proxy did not start: ${child.stderr()}`)),
          60_000,
        );
        const poll = setInterval(() => {
          const m = /listening on (http:\/\/\S+) /.exec(child.stdout() + child.stderr());
          if (m) {
            clearInterval(poll);
            clearTimeout(timer);
            resolve(m[1]!);
          }
        }, 50);
      });
      // Ids: rollouts of a store the proxy does not know (memory: is its own), plus hostile ones.
      const ids = new InMemoryLightningStore();
      const known: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await ids.startRollout({ input: i });
        known.push(r.rollout_id, r.attempt.attempt_id, `session-${i}`);
      }
      await ids.close();
      await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(chat),
      });
      const options = {
        baseUrl: url,
        routes: ROUTES,
        ids: () => known,
        // Documented: 502/503/504 when the upstream fails, answers garbage or times out.
        allowed5xx: (_route: Route, status: number) => status === 502 || status === 503 || status === 504,
        numRuns: FUZZ.requests,
        seed: FUZZ.seed,
        path: FUZZ.path,
      };
      await warmUp(options);
      // The warm-up may have paused the proxy (it fuzzes /proxy/pause too).
      await fetch(`${url}/proxy/resume`, { method: "POST" });
      await new Promise((r) => setTimeout(r, 1000));
      const pid = child.proc.pid!;
      const idle = rssBytes(pid);
      const watch = watchRss(pid);
      const result = await fuzzHttp(options);
      const peak = watch.stop();
      await fetch(`${url}/proxy/resume`, { method: "POST" });
      const after = await settledRss(pid, 1.5 * idle);
      const health = await fetch(`${url}/healthz`);
      const summary = {
        ...result,
        idleRssMiB: idle / MiB,
        peakRssMiB: peak / MiB,
        afterRssMiB: after / MiB,
        seed: FUZZ.seed,
      };
      await report("fuzz-proxy", summary);
      expect(result.undocumented5xx).toBe(0);
      expect(result.hangs).toBe(0);
      expect(health.status).toBe(200);
      // The memory goal: peak <= 2x idle + 256 MiB, back under 1.5x idle after the run.
      expect(peak).toBeLessThanOrEqual(2 * idle + 256 * MiB);
      expect(after).toBeLessThan(1.5 * idle);
    } finally {
      child.proc.kill("SIGKILL");
      await child.exited;
      await mock.close();
    }
  }, 900_000);
});
