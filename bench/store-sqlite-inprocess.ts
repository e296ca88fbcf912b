/**
 * The SQLite store's own CPU per rollout, without HTTP: the `rollout` scenario's store calls
 * (startRollout, 4 × addSpan of the Python client's span shape, updateAttempt "succeeded") from 32
 * concurrent callers in this process, on a fresh file per run. With BENCH_BASELINE_ENTRY=<another
 * build's packages/store/dist/index.js> both builds run back to back per repeat (order alternating),
 * and the per-pair ratio after/before is printed, so a store-only change is measured apart from the
 * HTTP path (which is most of the server's CPU per rollout and most of its run-to-run spread).
 * Both are built stores (`after` is this checkout's packages/store/dist).
 *
 *   pnpm exec tsx bench/store-sqlite-inprocess.ts   (env: BENCH_ROLLOUTS=2048, BENCH_REPEATS=4,
 *     BENCH_BASELINE_ENTRY, BENCH_MEMORY=1 to add the in-memory store as a floor)
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { InMemoryLightningStore, type LightningStore } from "@agl/core";
import type { SqliteLightningStore } from "../packages/store/src/index.js";

const TOTAL = Number(process.env.BENCH_ROLLOUTS ?? 2048);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 4);
const CONCURRENCY = 32;
const BASELINE = process.env.BENCH_BASELINE_ENTRY;
// This checkout's build (`pnpm --filter @agl/store build` first), as the baseline is a build too:
// tsx-transpiled sources would charge the transpiler's helpers to the change.
const AFTER = join(fileURLToPath(new URL("..", import.meta.url)), "packages/store/dist/index.js");

type Open = (path: string) => LightningStore;
const builds: Array<{ name: string; open: Open }> = [];
const sqliteOf = async (entry: string): Promise<Open> => {
  const mod = (await import(pathToFileURL(entry).href)) as {
    SqliteLightningStore: typeof SqliteLightningStore;
  };
  return (path) => new mod.SqliteLightningStore(path);
};
if (BASELINE) builds.push({ name: "before", open: await sqliteOf(BASELINE) });
builds.push({ name: "after", open: await sqliteOf(AFTER) });
if (process.env.BENCH_MEMORY) builds.push({ name: "memory", open: () => new InMemoryLightningStore() });

function span(rid: string, aid: string, seq: number) {
  const trace = seq.toString(16).padStart(32, "0");
  const id = seq.toString(16).padStart(16, "0");
  return {
    rollout_id: rid,
    attempt_id: aid,
    sequence_id: seq,
    trace_id: trace,
    span_id: id,
    parent_id: null,
    name: `span-${seq}`,
    status: { status_code: "OK" as const, description: null },
    attributes: { key: "x".repeat(150) },
    events: [],
    links: [],
    start_time: null,
    end_time: null,
    context: { trace_id: trace, span_id: id, is_remote: false, trace_state: {} },
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

async function rollout(store: LightningStore, task: number): Promise<void> {
  const r = await store.startRollout({ input: { task } });
  for (let seq = 1; seq <= 4; seq++) await store.addSpan(span(r.rollout_id, r.attempt.attempt_id, seq));
  await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
}

/** CPU ms per rollout of `TOTAL` rollouts after as many warm-up ones, on a fresh store. */
async function run(open: Open): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "agl-inprocess-"));
  const store = open(join(dir, "store.db"));
  try {
    let next = 0;
    const pool = async () => {
      while (next < TOTAL) await rollout(store, next++);
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, pool));
    next = 0;
    const c0 = process.cpuUsage();
    await Promise.all(Array.from({ length: CONCURRENCY }, pool));
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000 / TOTAL;
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(
  `load average at start ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ")}`,
);
const cpu: Record<string, number[]> = {};
for (let repeat = 0; repeat < REPEATS; repeat++) {
  for (const b of repeat % 2 === 0 ? builds : [...builds].reverse()) {
    const ms = await run(b.open);
    (cpu[b.name] ??= []).push(ms);
    console.log(JSON.stringify({ build: b.name, repeat, cpu_ms_per_rollout: ms }));
  }
}
for (const [name, xs] of Object.entries(cpu)) {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `${name}: mean ${mean.toFixed(3)} ms CPU per rollout (${xs.map((x) => x.toFixed(3)).join(", ")})`,
  );
}
if (cpu.before && cpu.after) {
  const ratios = cpu.after.map((a, i) => a / cpu.before![i]!);
  const mean = ratios.reduce((a, b) => a + b, 0) / ratios.length;
  console.log(
    `after/before per pair: ${ratios.map((r) => r.toFixed(3)).join(", ")}; mean ${mean.toFixed(3)}`,
  );
}
console.log(
  `load average at end ${loadavg()
    .map((x) => x.toFixed(2))
    .join(" / ")}`,
);
