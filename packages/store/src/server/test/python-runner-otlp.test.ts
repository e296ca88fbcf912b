import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findFinalReward, InMemoryLightningStore, type LightningStore, type Span } from "@agl/core";
import { type Context, type Span as OtelSpan, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../../test/support/postgres.js";
import { PostgresLightningStore } from "../../postgres/postgres-store.js";
import { SqliteLightningStore } from "../../sqlite/sqlite-store.js";
import { jsonLinesLogger } from "../logging.js";
import { type StoreServer, startStoreServer } from "../server.js";

/**
 * The goal of "no silent loss for Python runners": a stand-in of Python Agent Lightning's runner with
 * the Trainer's default AgentOpsTracer (an OpenTelemetry BatchSpanProcessor with an OTLP/protobuf
 * exporter to the store's /v1/traces, flushed once per rollout, so all spans of a rollout travel in one
 * request) runs an agent that emits a NUL character and a lone surrogate in one span. Every span and
 * the reward are stored, on every backend; the request gets no refusal.
 */

const NUL = "\u0000";

/** Stamps each span with its rollout and attempt, as Agent Lightning's tracer does before export. */
class AttemptStamp implements SpanProcessor {
  ids: { rollout: string; attempt: string } | null = null;
  onStart(span: OtelSpan, _parent: Context): void {
    if (!this.ids) return;
    span.setAttribute("agentlightning.rollout_id", this.ids.rollout);
    span.setAttribute("agentlightning.attempt_id", this.ids.attempt);
  }
  onEnd(_span: ReadableSpan): void {}
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

/** The Python runner's protocol: plain JSON requests without agl-ts headers. */
async function call(url: string, path: string, body: unknown): Promise<any> {
  const res = await fetch(`${url}/v1/agl/${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  expect(res.status, path).toBeLessThan(300);
  return res.json();
}

/** Claim `n` rollouts one by one, run the agent under the batched exporter, report success. */
async function runPythonRunner(url: string, n: number): Promise<void> {
  const stamp = new AttemptStamp();
  const exporter = new OTLPTraceExporter({ url: `${url}/v1/traces` });
  const exported: number[] = [];
  const recording = {
    export: (spans: ReadableSpan[], done: (r: { code: number }) => void) =>
      exporter.export(spans, (result) => {
        exported.push(result.code);
        done(result);
      }),
    shutdown: () => exporter.shutdown(),
    forceFlush: () => exporter.forceFlush(),
  };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "agentops" }),
    spanProcessors: [
      stamp,
      // Long delay and a large batch: only the per-rollout flush exports, all spans in one request.
      new BatchSpanProcessor(recording, { scheduledDelayMillis: 3_600_000, maxExportBatchSize: 512 }),
    ],
  });
  const tracer = provider.getTracer("agentops");
  for (let i = 0; i < n; i++) {
    const claimed = await call(url, "queues/rollouts/dequeue", { limit: 1, worker_id: "python-runner" });
    expect(claimed).toHaveLength(1);
    const { rollout_id: rid, attempt } = claimed[0];
    stamp.ids = { rollout: rid, attempt: attempt.attempt_id };
    const root = tracer.startSpan("agent.run");
    const ctx = trace.setSpan(ROOT_CONTEXT, root);
    const child = (name: string, attributes: Record<string, string | number>) =>
      tracer.startSpan(name, { attributes }, ctx).end();
    child("openai.chat", { "gen_ai.prompt.0.content": "what is 2+2?", "gen_ai.completion.0.content": "4" });
    // The agent's tool returns text with a NUL and a lone surrogate (e.g. bytes decoded leniently).
    child("tool.call", { "tool.output": `binary${NUL}data \ud800`, [`arg${NUL}`]: 1 });
    child("openai.chat", { "gen_ai.completion.0.content": "done" });
    child("agentlightning.annotation", {
      "agentlightning.reward.0.name": "primary",
      "agentlightning.reward.0.value": 1 + i / 10,
    });
    root.end();
    await provider.forceFlush();
    await call(url, `rollouts/${rid}/attempts/${attempt.attempt_id}`, { status: "succeeded" });
  }
  await provider.shutdown();
  // One export per rollout, each a success.
  expect(exported).toEqual(Array.from({ length: n }, () => 0));
}

let pgUrl: { url: string; drop: () => Promise<void> };
let schemas = 0;
beforeAll(async () => {
  pgUrl = await createTestDatabase();
});
afterAll(async () => {
  await pgUrl?.drop();
});

const backends: Array<[string, () => Promise<{ store: LightningStore; cleanup?: () => void }>]> = [
  ["memory", async () => ({ store: new InMemoryLightningStore() })],
  [
    "sqlite",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "agl-pyrunner-"));
      return {
        store: new SqliteLightningStore(join(dir, "store.db")),
        cleanup: () => rmSync(dir, { recursive: true, force: true }),
      };
    },
  ],
  [
    "postgres",
    async () => ({
      store: await PostgresLightningStore.connect(pgUrl.url, {
        schema: `pyrunner_${process.pid}_${schemas++}`,
        poolSize: 4,
      }),
    }),
  ],
];

describe("a Python runner with the batched AgentOps exporter, an agent emitting NUL in one span", () => {
  for (const [name, open] of backends) {
    it(`stores all spans and the reward (${name})`, async () => {
      const { store, cleanup } = await open();
      const logs: Array<Record<string, any>> = [];
      const server: StoreServer = await startStoreServer({
        store,
        port: 0,
        logger: jsonLinesLogger((line) => logs.push(JSON.parse(line))),
      });
      try {
        const rollouts = await store.enqueueManyRollouts([0, 1, 2].map((i) => ({ input: { i } })));
        await runPythonRunner(server.url, rollouts.length);
        for (const [i, r] of rollouts.entries()) {
          expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
          const spans: Span[] = (await store.querySpans(r.rollout_id, { sortBy: "sequence_id" })).items;
          expect(spans.map((s) => s.name).sort()).toEqual(
            ["agent.run", "agentlightning.annotation", "openai.chat", "openai.chat", "tool.call"].sort(),
          );
          expect(findFinalReward(spans)).toBeCloseTo(1 + i / 10, 10);
          const tool = spans.find((s) => s.name === "tool.call")!;
          expect(tool.attributes).toMatchObject({
            "tool.output": "binary\uFFFDdata \uFFFD",
            "arg\uFFFD": 1,
            "agl.sanitized": true,
          });
          expect(spans.filter((s) => s.attributes["agl.sanitized"] === true)).toHaveLength(1);
        }
        expect(logs.filter((l) => l.level !== "info")).toEqual([]);
      } finally {
        await server.close();
        await store.close();
        cleanup?.();
      }
    });
  }
});

describe("a Python client's add_span with NUL in unknown keys of context, parent and resource", () => {
  for (const [name, open] of backends) {
    it(`is stored sanitised, never a 500 (${name})`, async () => {
      const { store, cleanup } = await open();
      const server = await startStoreServer({ store, port: 0, logger: jsonLinesLogger(() => {}) });
      try {
        const r = await store.startRollout({ input: 1 });
        const context = { trace_id: "t", span_id: "s", is_remote: false, trace_state: {} };
        const span = {
          rollout_id: r.rollout_id,
          attempt_id: r.attempt.attempt_id,
          sequence_id: 1,
          trace_id: "t",
          span_id: "s",
          parent_id: null,
          name: "n",
          status: { status_code: "UNSET", description: null },
          attributes: {},
          events: [],
          links: [],
          start_time: null,
          end_time: null,
          context: { ...context, [`${NUL}k`]: "v" },
          parent: { ...context, [`p${NUL}`]: "v" },
          resource: { attributes: {}, schema_url: "", [`r${NUL}`]: 1 },
        };
        const res = await fetch(`${server.url}/v1/agl/spans`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(span),
        });
        expect(res.status).toBe(201);
        const [stored] = (await store.querySpans(r.rollout_id)).items;
        expect(stored).toMatchObject({
          context: { "\uFFFDk": "v" },
          parent: { "p\uFFFD": "v" },
          resource: { "r\uFFFD": 1 },
          attributes: { "agl.sanitized": true },
        });
      } finally {
        await server.close();
        await store.close();
        cleanup?.();
      }
    });
  }
});
