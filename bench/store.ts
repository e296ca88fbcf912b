/**
 * Store throughput, modelled on Agent Lightning's tests/benchmark/benchmark_store.py "batch" scenario:
 * add resources, enqueue the rollouts in batches, N runners each dequeue → report the rollout's spans
 * (rounds of `agent{i}` ⊃ `round{i}_1`, `round{i}_2` with random flattened attributes, the task in one
 * round, a reward after each round with p=.5, then `final` and a reward in [1,2]) → mark the attempt
 * succeeded, while the driver polls waitForRollouts(timeout 0) until every rollout is done. Agents do
 * no work (sleep 0), so this measures the store. Backends: memory, SQLite and PostgreSQL in-process,
 * and each behind the HTTP store server (a separate process; LightningStoreClient here), next to the
 * req/s of a trivial endpoint on the same server library (hono + @hono/node-server): the ceiling.
 *
 *   pnpm exec tsx bench/store.ts            (env: BENCH_ROLLOUTS, BENCH_RUNNERS, BENCH_ROUNDS)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LightningStoreClient } from "@agl/client";
import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import { PostgresLightningStore, SqliteLightningStore } from "@agl/store";
import autocannon from "autocannon";
import { startPostgresCluster } from "../test/support/postgres.js";
import { type Payload, type RunResult, runBatch as runScenario } from "./support/store-scenario.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TOTAL = Number(process.env.BENCH_ROLLOUTS ?? 2000);
const RUNNERS = Number(process.env.BENCH_RUNNERS ?? 32);
const MAX_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BATCH = 256;
/** e.g. BENCH_ONLY=sqlite:http,memory (backend[:transport]) to run a subset while profiling. */
const ONLY = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
const MAX_SECONDS = Number(process.env.BENCH_MAX_SECONDS ?? 8);
const PAYLOADS: Payload[] = ["reference", "light"];
const runBatch = (store: LightningStore, payload: Payload) =>
  runScenario(store, {
    total: TOTAL,
    runners: RUNNERS,
    maxRounds: MAX_ROUNDS,
    batch: BATCH,
    payload,
    maxSeconds: MAX_SECONDS,
  });
const selected = (backend: string, transport: string) =>
  ONLY.length === 0 || ONLY.some((o) => o === backend || o === `${backend}:${transport}`);

// --- servers in child processes

async function startChild(
  args: string[],
): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    ["--import", "tsx", join(ROOT, "bench/support/http-server.ts"), ...args],
    {
      cwd: ROOT,
      stdio: ["pipe", "pipe", "inherit"],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n").find((l) => l.startsWith("http://"));
      if (line) resolve(line.trim());
    });
    child.once("exit", (code) => reject(new Error(`server process exited with ${code}`)));
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.stdin!.end();
      setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
    });
  return { url, child, stop };
}

async function ceiling(): Promise<{ requests_per_s: number; p99_ms: number }> {
  const server = await startChild(["trivial"]);
  try {
    const result = await autocannon({ url: `${server.url}/health`, connections: 50, duration: 4 });
    return { requests_per_s: result.requests.average, p99_ms: result.latency.p99 };
  } finally {
    await server.stop();
  }
}

// --- main

interface Row extends RunResult {
  backend: string;
  transport: "in-process" | "http";
  payload: Payload;
}

const tmp = mkdtempSync(join(tmpdir(), "agl-bench-store-"));
const pgCluster = await startPostgresCluster({ durable: true });
const rows: Row[] = [];
// The machine is shared: record how busy it was, since absolute rates depend on it.
const loadAtStart = loadavg();
let dbCounter = 0;

async function freshPostgres(): Promise<string> {
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: pgCluster.url });
  await client.connect();
  const name = `bench_${dbCounter++}`;
  await client.query(`CREATE DATABASE ${name}`);
  await client.end();
  const url = new URL(pgCluster.url);
  url.pathname = `/${name}`;
  return url.toString();
}

const backends: Array<{
  name: string;
  uri: () => Promise<string>;
  open: (uri: string) => Promise<LightningStore>;
}> = [
  { name: "memory", uri: async () => "memory:", open: async () => new InMemoryLightningStore() },
  {
    name: "sqlite",
    uri: async () => `sqlite:${join(tmp, `bench-${dbCounter++}.db`)}`,
    open: async (uri) => new SqliteLightningStore(uri.slice("sqlite:".length)),
  },
  {
    name: "postgres",
    uri: freshPostgres,
    open: (uri) => PostgresLightningStore.connect(uri, { poolSize: 16 }),
  },
];

try {
  console.log(
    `store benchmark: ${TOTAL} rollouts, ${RUNNERS} runners, 1-${MAX_ROUNDS} rounds, ${cpus().length} cores`,
  );
  const trivial = ONLY.length === 0 ? await ceiling() : { requests_per_s: 0, p99_ms: 0 };
  console.log(
    `ceiling: trivial hono endpoint ${trivial.requests_per_s.toFixed(0)} req/s (p99 ${trivial.p99_ms} ms)`,
  );
  for (const backend of backends) {
    // A fresh database per run: a capped run leaves queued rollouts that would delay the next one.
    for (const payload of PAYLOADS) {
      if (!selected(backend.name, "in-process")) break;
      const store = await backend.open(await backend.uri());
      try {
        const result = await runBatch(store, payload);
        rows.push({ backend: backend.name, transport: "in-process", payload, ...result });
        console.log(
          `${backend.name} in-process, ${payload} spans: ${result.rollouts_per_s.toFixed(0)} rollouts/s`,
        );
      } finally {
        await store.close();
      }
    }
    for (const payload of PAYLOADS) {
      if (!selected(backend.name, "http")) break;
      const server = await startChild(["store", await backend.uri()]);
      const client = new LightningStoreClient({ url: server.url });
      try {
        const result = await runBatch(client, payload);
        rows.push({ backend: backend.name, transport: "http", payload, ...result });
        console.log(
          `${backend.name} over HTTP, ${payload} spans: ${result.rollouts_per_s.toFixed(0)} rollouts/s`,
        );
      } finally {
        await client.close();
        await server.stop();
      }
    }
  }

  const results = {
    benchmark: "store batch scenario (benchmark_store.py)",
    date: new Date().toISOString(),
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model, node: process.version },
    parameters: {
      rollouts: TOTAL,
      runners: RUNNERS,
      max_rounds: MAX_ROUNDS,
      enqueue_batch: BATCH,
      agent_sleep_s: 0,
      max_seconds_per_run: MAX_SECONDS,
      payloads: {
        reference:
          "benchmark_store.py attributes: depth 1-3, breadth 2-6, keys 3-20, values 5-300 chars (~5.6 KB/span)",
        light: "3 attributes of 20-60 chars per span (the store's own overhead)",
      },
    },
    load_average_at_start: loadAtStart,
    ceiling: { server: "hono + @hono/node-server, GET /health", connections: 50, ...trivial },
    results: rows,
    reference:
      "Agent Lightning v0.3 benchmark_store.py reports 3-57 rollouts/s on 32-64 cores (memory/mongo store over HTTP).",
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/store.json"), `${JSON.stringify(results, null, 2)}\n`);
  const md = [
    "# Store benchmark (batch scenario of Agent Lightning's benchmark_store.py)",
    "",
    `${TOTAL} rollouts per run (each run stops after ${MAX_SECONDS} s; the rate counts finished rollouts), ${RUNNERS} concurrent`,
    `runners, 1-${MAX_ROUNDS} rounds per rollout (3 spans per round, rewards), agent sleep 0, enqueued in batches of 256,`,
    "driver polling waitForRollouts(0). Span payload `reference` = benchmark_store.py's random flattened attributes",
    "(depth 1-3, breadth 2-6, values 5-300 chars: ~5.6 KB per span, ~50 KB per rollout); `light` = 3 short attributes.",
    `Load average when the run started: ${loadAtStart.map((l) => l.toFixed(1)).join(" / ")} (the machine is shared).`,
    `Machine: ${availableParallelism()} cores (${cpus()[0]?.model}), Node ${process.version}. Over HTTP the store server runs in`,
    "its own process and the runners use LightningStoreClient. PostgreSQL 15 with default durability (fsync on).",
    "",
    `Ceiling: a trivial hono endpoint on the same server library: **${trivial.requests_per_s.toFixed(0)} req/s** (p99 ${trivial.p99_ms} ms, 50 connections).`,
    "",
    "| backend | transport | span payload | rollouts/s | spans/s | rollouts done | seconds |",
    "|---|---|---|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.backend} | ${r.transport} | ${r.payload} | ${r.rollouts_per_s.toFixed(0)} | ${r.spans_per_s.toFixed(0)} | ${r.rollouts} | ${r.seconds.toFixed(2)} |`,
    ),
    "",
    "Per rollout the runner makes 4 store calls (dequeue, getManySpanSequenceIds, addManySpans, updateAttempt), so",
    "over HTTP each rollout is 4 requests plus its share of the driver's polls.",
    "Agent Lightning v0.3 reports 3-57 rollouts/s for this scenario on 32-64 cores.",
    "",
  ].join("\n");
  writeFileSync(join(ROOT, "bench/results/store.md"), md);
  console.log(md);
} finally {
  pgCluster.stop();
  rmSync(tmp, { recursive: true, force: true });
}
