import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LightningStoreClient } from "@agl/client";
import { llm } from "@agl/core";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { FUZZ, report } from "./config.js";
import { fuzzHttp, type Route, warmUp } from "./http-fuzz.js";
import { RestartableStore } from "./processes.js";
import { MiB, rssBytes, settledRss, watchRss } from "./rss.js";

const span = {
  rollout_id: ":rid",
  attempt_id: ":aid",
  sequence_id: 1,
  trace_id: "ab".repeat(16),
  span_id: "cd".repeat(8),
  name: "s",
  attributes: { k: "v", n: 1 },
};
const otlp = {
  resourceSpans: [
    {
      resource: { attributes: [{ key: "agentlightning.rollout_id", value: { stringValue: "ro-x" } }] },
      scopeSpans: [
        {
          spans: [
            {
              traceId: "ab",
              spanId: "cd",
              name: "s",
              attributes: [{ key: "k", value: { kvlistValue: { values: [] } } }],
            },
          ],
        },
      ],
    },
  ],
};

/** Every route of the store server (v0.3 REST API, extensions, OTLP, legacy task API). */
const ROUTES: Route[] = [
  { method: "GET", path: "/v1/agl/health" },
  { method: "GET", path: "/v1/agl/statistics" },
  { method: "GET", path: "/v1/agl/resources" },
  {
    method: "POST",
    path: "/v1/agl/resources",
    body: { main: { resource_type: "llm", endpoint: "http://h/v1", model: "m" } },
  },
  { method: "GET", path: "/v1/agl/resources/latest" },
  { method: "GET", path: "/v1/agl/resources/:id" },
  {
    method: "POST",
    path: "/v1/agl/resources/:id",
    body: { p: { resource_type: "prompt_template", template: "{x}" } },
  },
  { method: "POST", path: "/v1/agl/spans", body: span },
  { method: "POST", path: "/v1/agl/spans/batch", body: { spans: [span] } },
  { method: "GET", path: "/v1/agl/spans" },
  { method: "POST", path: "/v1/agl/spans/search", body: { rollout_id: "ro-x", limit: 5 } },
  { method: "POST", path: "/v1/agl/spans/next", body: { rollout_id: "ro-x", attempt_id: "at-x" } },
  {
    method: "POST",
    path: "/v1/agl/spans/next/batch",
    body: { pairs: [{ rollout_id: "ro-x", attempt_id: "at-x" }] },
  },
  { method: "GET", path: "/v1/agl/workers" },
  { method: "POST", path: "/v1/agl/workers/search", body: { status_in: ["idle"] } },
  { method: "GET", path: "/v1/agl/workers/:wid" },
  { method: "POST", path: "/v1/agl/workers/:wid", body: { heartbeat_stats: { cpu: 1 } } },
  {
    method: "POST",
    path: "/v1/agl/queues/rollouts/enqueue",
    body: { rollouts: [{ input: { q: 1 }, config: { max_attempts: 2 } }] },
  },
  { method: "POST", path: "/v1/agl/queues/rollouts/dequeue", body: { limit: 1, worker_id: "w1" } },
  { method: "POST", path: "/v1/agl/rollouts", body: { input: 1, mode: "train", worker_id: "w1" } },
  { method: "GET", path: "/v1/agl/rollouts" },
  {
    method: "POST",
    path: "/v1/agl/rollouts/search",
    body: { status_in: ["queuing"], limit: 3, sort_by: "start_time" },
  },
  { method: "GET", path: "/v1/agl/rollouts/:rid" },
  { method: "POST", path: "/v1/agl/rollouts/:rid", body: { metadata: { a: 1 }, status: "running" } },
  { method: "POST", path: "/v1/agl/rollouts/:rid/attempts", body: { worker_id: "w2" } },
  { method: "GET", path: "/v1/agl/rollouts/:rid/attempts" },
  { method: "POST", path: "/v1/agl/rollouts/:rid/attempts/search", body: { limit: 2 } },
  { method: "GET", path: "/v1/agl/rollouts/:rid/attempts/latest" },
  {
    method: "POST",
    path: "/v1/agl/rollouts/:rid/attempts/:aid",
    body: { status: "running", last_heartbeat_time: 1 },
  },
  { method: "POST", path: "/v1/agl/waits/rollouts", body: { rollout_ids: ["ro-x"], timeout: 0.05 } },
  { method: "POST", path: "/v1/traces", body: otlp },
  { method: "POST", path: "/v1/traces", body: otlp, contentType: "application/x-protobuf" },
  { method: "POST", path: "/v1/metrics", body: {} },
  { method: "GET", path: "/task" },
  { method: "GET", path: "/resources/latest" },
  { method: "GET", path: "/resources/:id" },
  { method: "POST", path: "/rollout", body: { rollout_id: ":rid", final_reward: 1 } },
];

async function fuzzStore(db: string): Promise<Record<string, unknown>> {
  const store = await RestartableStore.start(db);
  const client = new LightningStoreClient({ url: store.url });
  const ids: string[] = [];
  try {
    await client.addResources({ main: llm({ endpoint: "http://h/v1", model: "m" }) });
    for (let i = 0; i < 5; i++) {
      const r = await client.startRollout({ input: i });
      ids.push(r.rollout_id, r.attempt.attempt_id);
    }
    const options = {
      baseUrl: store.url,
      routes: ROUTES,
      ids: () => ids,
      // Documented: 501 for OTLP signals the store does not take.
      allowed5xx: (route: Route, status: number) =>
        status === 501 && route.path !== "/v1/traces" && route.path.startsWith("/v1/"),
      numRuns: FUZZ.requests,
      seed: FUZZ.seed,
      path: FUZZ.path,
    };
    await warmUp(options);
    await new Promise((r) => setTimeout(r, 1000));
    const idleRss = rssBytes(store.pid);
    const watch = watchRss(store.pid);
    const result = await fuzzHttp(options);
    const peakRss = watch.stop();
    const afterRss = await settledRss(store.pid, 1.5 * idleRss);
    const health = await fetch(`${store.url}/v1/agl/health`);
    return {
      ...result,
      idleRssMiB: idleRss / MiB,
      peakRssMiB: peakRss / MiB,
      afterRssMiB: afterRss / MiB,
      healthy: health.status === 200,
      seed: FUZZ.seed,
    };
  } finally {
    await client.close();
    await store.kill();
  }
}

describe("HTTP fuzz of every store route (seeded; AGL_FUZZ_SEED replays)", () => {
  for (const backend of ["sqlite", "postgres"] as const) {
    it(`${backend}: no undocumented 5xx, no hang, peak memory bounded, back under 1.5x idle`, async () => {
      let db: string;
      let cleanup: () => Promise<void>;
      if (backend === "sqlite") {
        const dir = mkdtempSync(join(tmpdir(), "agl-fuzz-"));
        db = `sqlite:${join(dir, "agl.db")}`;
        cleanup = async () => rmSync(dir, { recursive: true, force: true });
      } else {
        const created = await createTestDatabase();
        db = created.url;
        cleanup = created.drop;
      }
      try {
        const result = await fuzzStore(db);
        await report(`fuzz-store-${backend}`, result);
        expect(result.undocumented5xx).toBe(0);
        expect(result.hangs).toBe(0);
        expect(result.healthy).toBe(true);
        // The memory goal: peak <= 2x idle + 256 MiB, back under 1.5x idle after the run.
        const idle = result.idleRssMiB as number;
        expect(result.peakRssMiB as number).toBeLessThanOrEqual(2 * idle + 256);
        expect(result.afterRssMiB as number).toBeLessThan(1.5 * idle);
      } finally {
        await cleanup();
      }
    }, 900_000);
  }
});
