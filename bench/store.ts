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
import { availableParallelism, cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryLightningStore, type LightningStore, type SpanInput } from "@agl/core";
import { LightningStoreClient } from "@agl/client";
import { PostgresLightningStore, SqliteLightningStore } from "@agl/store";
import autocannon from "autocannon";
import { startPostgresCluster } from "../test/support/postgres.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TOTAL = Number(process.env.BENCH_ROLLOUTS ?? 2000);
const RUNNERS = Number(process.env.BENCH_RUNNERS ?? 32);
const MAX_ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BATCH = 256;

// --- the agent's spans (benchmark_store.py: random flattened attributes, depth 1-3, breadth 2-6,
// keys 3-20 chars, values 5-300 chars)

let seed = 42;
const rand = () => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed / 0x7fffffff;
};
const randint = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
const randomString = (lo: number, hi: number) => {
  let s = "";
  for (let i = randint(lo, hi); i > 0; i--) s += ALPHABET[Math.floor(rand() * ALPHABET.length)];
  return s;
};

function randomAttributes(): Record<string, string> {
  const out: Record<string, string> = {};
  const fill = (prefix: string, depth: number) => {
    const breadth = randint(2, 6);
    for (let i = 0; i < breadth; i++) {
      const key = `${prefix}${randomString(3, 20).replaceAll(" ", "_")}`;
      if (depth <= 1) out[key] = randomString(5, 300);
      else fill(`${key}.`, depth - 1);
    }
  };
  fill("", randint(1, 3));
  return out;
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, "0");
let spanCounter = 0;

/** The spans one rollout reports (without sequence ids), as benchmark_store.py's agent produces them. */
function agentSpans(rolloutId: string, attemptId: string, task: string): Array<Omit<SpanInput, "sequence_id">> {
  const traceId = hex(randint(0, 2 ** 30), 32);
  const spans: Array<Omit<SpanInput, "sequence_id">> = [];
  const now = Date.now() / 1000;
  const span = (name: string, parentId: string | null, attributes: Record<string, unknown>) => {
    const spanId = hex(++spanCounter, 16);
    spans.push({
      rollout_id: rolloutId,
      attempt_id: attemptId,
      trace_id: traceId,
      span_id: spanId,
      parent_id: parentId,
      name,
      attributes,
      start_time: now,
      end_time: now,
      status: { status_code: "OK", description: null },
    });
    return spanId;
  };
  const reward = (value: number) =>
    span("agentlightning.annotation", null, {
      "agentlightning.reward.0.name": "primary",
      "agentlightning.reward.0.value": value,
    });
  const rounds = randint(1, MAX_ROUNDS);
  const taskRound = randint(1, rounds);
  for (let i = 1; i <= rounds; i++) {
    const agent = span(`agent${i}`, null, { ...randomAttributes(), ...(i === taskRound ? { task } : {}) });
    span(`round${i}_1`, agent, randomAttributes());
    span(`round${i}_2`, agent, randomAttributes());
    if (rand() < 0.5) reward(rand());
  }
  span("final", null, randomAttributes());
  reward(1 + rand());
  return spans;
}

// --- the scenario

interface RunResult {
  rollouts: number;
  spans: number;
  seconds: number;
  rollouts_per_s: number;
  spans_per_s: number;
}

async function runBatch(store: LightningStore): Promise<RunResult> {
  await store.addResources({
    main_llm: { resource_type: "llm", endpoint: "http://127.0.0.1:9/v1", model: "bench", api_key: null, sampling_parameters: {} },
  });
  const started = performance.now();
  const ids: string[] = [];
  for (let i = 0; i < TOTAL; i += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, TOTAL - i) }, (_, j) => ({ input: { task: `task-${i + j}` } }));
    ids.push(...(await store.enqueueManyRollouts(batch)).map((r) => r.rollout_id));
  }
  let spans = 0;
  let done = false;
  const runner = async (n: number) => {
    const workerId = `Worker-${n}`;
    while (!done) {
      const claimed = await store.dequeueRollout({ workerId });
      if (!claimed) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        continue;
      }
      const task = (claimed.input as { task: string }).task;
      const body = agentSpans(claimed.rollout_id, claimed.attempt.attempt_id, task);
      const seqs = await store.getManySpanSequenceIds(body.map(() => [claimed.rollout_id, claimed.attempt.attempt_id] as const));
      const stored = await store.addManySpans(body.map((s, i) => ({ ...s, sequence_id: seqs[i]! })));
      spans += stored.length;
      await store.updateAttempt(claimed.rollout_id, claimed.attempt.attempt_id, { status: "succeeded" });
    }
  };
  const runners = Array.from({ length: RUNNERS }, (_, n) => runner(n));
  // The driver: poll wait_for_rollouts(timeout=0), as the batch mode does (every 50 ms here, not 5 s).
  const pending = new Set(ids);
  while (pending.size > 0) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const finished = await store.waitForRollouts([...pending], { timeoutSeconds: 0 });
    for (const r of finished) pending.delete(r.rollout_id);
  }
  const seconds = (performance.now() - started) / 1000;
  done = true;
  await Promise.all(runners);
  await check(store, ids);
  return { rollouts: TOTAL, spans, seconds, rollouts_per_s: TOTAL / seconds, spans_per_s: spans / seconds };
}

/** benchmark_store.py's checks on a sample: succeeded, the task is in the latest attempt's spans, final reward in [1,2]. */
async function check(store: LightningStore, ids: string[]): Promise<void> {
  const succeeded = await store.queryRollouts({ rolloutIdIn: ids, statusIn: ["succeeded"], limit: 1 });
  if (succeeded.total !== ids.length) throw new Error(`only ${succeeded.total}/${ids.length} rollouts succeeded`);
  for (const id of ids.filter((_, i) => i % Math.ceil(ids.length / 20) === 0)) {
    const rollout = await store.getRolloutById(id);
    const spans = (await store.querySpans(id, { attemptId: "latest" })).items;
    const task = (rollout?.input as { task: string }).task;
    if (!spans.some((s) => s.attributes.task === task)) throw new Error(`task missing from the spans of ${id}`);
    const rewards = spans.filter((s) => s.name === "agentlightning.annotation");
    const final = rewards[rewards.length - 1]?.attributes["agentlightning.reward.0.value"] as number;
    if (!(final >= 1 && final <= 2)) throw new Error(`final reward of ${id} is ${final}`);
  }
}

// --- servers in child processes

async function startChild(args: string[]): Promise<{ url: string; child: ChildProcess; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, ["--import", "tsx", join(ROOT, "bench/support/http-server.ts"), ...args], {
    cwd: ROOT,
    stdio: ["pipe", "pipe", "inherit"],
  });
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
}

const tmp = mkdtempSync(join(tmpdir(), "agl-bench-store-"));
const pgCluster = await startPostgresCluster({ durable: true });
const rows: Row[] = [];
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

const backends: Array<{ name: string; uri: () => Promise<string>; open: (uri: string) => Promise<LightningStore> }> = [
  { name: "memory", uri: async () => "memory:", open: async () => new InMemoryLightningStore() },
  {
    name: "sqlite",
    uri: async () => `sqlite:${join(tmp, `bench-${dbCounter++}.db`)}`,
    open: async (uri) => new SqliteLightningStore(uri.slice("sqlite:".length)),
  },
  { name: "postgres", uri: freshPostgres, open: (uri) => PostgresLightningStore.connect(uri, { poolSize: 16 }) },
];

try {
  console.log(`store benchmark: ${TOTAL} rollouts, ${RUNNERS} runners, 1-${MAX_ROUNDS} rounds, ${cpus().length} cores`);
  const trivial = await ceiling();
  console.log(`ceiling: trivial hono endpoint ${trivial.requests_per_s.toFixed(0)} req/s (p99 ${trivial.p99_ms} ms)`);
  for (const backend of backends) {
    const uri = await backend.uri();
    const store = await backend.open(uri);
    try {
      const result = await runBatch(store);
      rows.push({ backend: backend.name, transport: "in-process", ...result });
      console.log(`${backend.name} in-process: ${result.rollouts_per_s.toFixed(0)} rollouts/s (${result.spans_per_s.toFixed(0)} spans/s)`);
    } finally {
      await store.close();
    }
    const server = await startChild(["store", await backend.uri()]);
    const client = new LightningStoreClient({ url: server.url });
    try {
      const result = await runBatch(client);
      rows.push({ backend: backend.name, transport: "http", ...result });
      console.log(`${backend.name} over HTTP: ${result.rollouts_per_s.toFixed(0)} rollouts/s (${result.spans_per_s.toFixed(0)} spans/s)`);
    } finally {
      await client.close();
      await server.stop();
    }
  }

  const results = {
    benchmark: "store batch scenario (benchmark_store.py)",
    date: new Date().toISOString(),
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model, node: process.version },
    parameters: { rollouts: TOTAL, runners: RUNNERS, max_rounds: MAX_ROUNDS, enqueue_batch: BATCH, agent_sleep_s: 0 },
    ceiling: { server: "hono + @hono/node-server, GET /health", connections: 50, ...trivial },
    results: rows,
    reference: "Agent Lightning v0.3 benchmark_store.py reports 3-57 rollouts/s on 32-64 cores (memory/mongo store over HTTP).",
  };
  mkdirSync(join(ROOT, "bench/results"), { recursive: true });
  writeFileSync(join(ROOT, "bench/results/store.json"), `${JSON.stringify(results, null, 2)}\n`);
  const md = [
    "# Store benchmark (batch scenario of Agent Lightning's benchmark_store.py)",
    "",
    `${TOTAL} rollouts, ${RUNNERS} concurrent runners, 1-${MAX_ROUNDS} rounds per rollout (3 spans per round with random`,
    "flattened attributes, rewards), agent sleep 0, enqueued in batches of 256, driver polling waitForRollouts(0).",
    `Machine: ${availableParallelism()} cores (${cpus()[0]?.model}), Node ${process.version}. Over HTTP the store server runs in`,
    "its own process and the runners use LightningStoreClient. PostgreSQL 15 with default durability (fsync on).",
    "",
    `Ceiling: a trivial hono endpoint on the same server library: **${trivial.requests_per_s.toFixed(0)} req/s** (p99 ${trivial.p99_ms} ms, 50 connections).`,
    "",
    "| backend | transport | rollouts/s | spans/s | seconds |",
    "|---|---|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.backend} | ${r.transport} | ${r.rollouts_per_s.toFixed(0)} | ${r.spans_per_s.toFixed(0)} | ${r.seconds.toFixed(2)} |`,
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
