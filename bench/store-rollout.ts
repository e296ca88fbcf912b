/**
 * Agent Lightning's `rollout` store micro-benchmark (micro_benchmark.py: start_rollout, 4 add_span,
 * update_attempt per rollout, from many client processes) against the agl-store server on memory,
 * SQLite and PostgreSQL, measuring CPU per rollout: the server process's CPU time, and for
 * PostgreSQL every process of the database cluster (from /proc), so work moved into the database is
 * counted. With BENCH_BASELINE_ROOT=<checkout> (built with `pnpm build`) the same runs are made
 * back to back against that build's store server, so before/after ratios come from one run.
 * Also: where the CPU goes per request type (the three kinds of request run as separate phases),
 * and the OTLP case of a Python runner with OtelTracer (one single-span OTLP request after another,
 * BENCH_OTLP_SPANS per rollout, BENCH_OTLP_RUNNERS runners at once): time per rollout by backend.
 *
 *   pnpm exec tsx bench/store-rollout.ts   (env: BENCH_ROLLOUTS=2048, BENCH_CONCURRENCY=32,
 *     BENCH_REPEATS=2, BENCH_OTLP_ROLLOUTS=8, BENCH_OTLP_SPANS=200, BENCH_OTLP_RUNNERS=4,
 *     BENCH_OTLP_REPEATS=1, BENCH_BASELINE_ROOT, BENCH_ONLY=postgres,sqlite, BENCH_PARTS=rollout,phases,otlp,
 *     BENCH_RESULT=store-rollout)
 * Backends and the database CPU: support/bench-backends.ts; the phases: support/store-phases.ts; the
 * result files: support/store-rollout-report.ts.
 */
import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LightningStoreClient } from "@agl/client";
import { startBenchBackends } from "./support/bench-backends.js";
import { otlpRollout, pythonRollout, runPool } from "./support/rollout-scenario.js";
import { startCliServer } from "./support/server-process.js";
import { phases } from "./support/store-phases.js";
import {
  type Build,
  type OtlpRow,
  type PhaseRow,
  type RolloutRow,
  writeResults,
} from "./support/store-rollout-report.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TOTAL = Number(process.env.BENCH_ROLLOUTS ?? 2048);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const OTLP_ROLLOUTS = Number(process.env.BENCH_OTLP_ROLLOUTS ?? 8);
const OTLP_SPANS = Number(process.env.BENCH_OTLP_SPANS ?? 200);
const OTLP_RUNNERS = Number(process.env.BENCH_OTLP_RUNNERS ?? 4);
const OTLP_REPEATS = Number(process.env.BENCH_OTLP_REPEATS ?? 1);
const BASELINE = process.env.BENCH_BASELINE_ROOT;
const ONLY = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
/** Which parts to run (e.g. BENCH_PARTS=rollout while profiling); results are written only for a full run. */
const PARTS = (process.env.BENCH_PARTS ?? "rollout,phases,otlp").split(",");
/** Results file name under bench/results/ (a second baseline's run goes to its own file). */
const RESULT = process.env.BENCH_RESULT ?? "store-rollout";
const backendsRun = await startBenchBackends();

interface Measured {
  seconds: number;
  server_cpu_ms: number;
  db_cpu_ms: number;
  requests: number;
}

/** Run `work` against a fresh store server and measure its process and the database cluster. */
async function measure(
  build: Build,
  backend: string,
  work: (base: URL) => Promise<void>,
  check?: (base: URL) => Promise<void>,
): Promise<Measured> {
  const server = await startCliServer(build.root, await backendsRun.uriFor(backend));
  try {
    const base = new URL(server.url);
    const before = await server.usage();
    const db0 = backendsRun.databaseCpuMs();
    const t0 = performance.now();
    await work(base);
    const seconds = (performance.now() - t0) / 1000;
    const after = await server.usage();
    const db1 = backendsRun.databaseCpuMs();
    await check?.(base);
    return {
      seconds,
      server_cpu_ms: after.cpu_ms - before.cpu_ms,
      db_cpu_ms: backend === "postgres" ? db1 - db0 : 0,
      requests: after.requests - before.requests,
    };
  } finally {
    await server.stop();
  }
}

/** The benchmark's check: every rollout succeeded with its 4 spans (on a sample). */
async function checkRollouts(base: URL, total: number): Promise<void> {
  const client = new LightningStoreClient({ url: base.toString().replace(/\/$/, "") });
  try {
    const ok = await client.queryRollouts({ statusIn: ["succeeded"], limit: 1 });
    if (ok.total !== total) throw new Error(`${ok.total}/${total} rollouts succeeded`);
    const sample = await client.queryRollouts({ limit: 5 });
    for (const r of sample.items) {
      const spans = await client.querySpans(r.rollout_id);
      if (spans.total !== 4) throw new Error(`rollout ${r.rollout_id} has ${spans.total} spans`);
    }
  } finally {
    await client.close();
  }
}

const builds: Build[] = [
  ...(BASELINE ? [{ name: "before" as const, root: BASELINE }] : []),
  // This checkout's build (`pnpm build` first): timing tsx-transpiled sources against a build would
  // charge the transpiler's helpers to the change.
  { name: "after", root: ROOT },
];
for (const b of builds)
  if (!existsSync(join(b.root, "packages/store/dist/cli.js")))
    throw new Error(`build ${b.root} first: pnpm --filter "@agl/store..." build`);
const backends = ["memory", "sqlite", "postgres"].filter((b) => ONLY.length === 0 || ONLY.includes(b));

const rolloutRows: RolloutRow[] = [];
const phaseRows: PhaseRow[] = [];
const otlpRows: OtlpRow[] = [];
const loadAtStart = loadavg();

try {
  console.log(
    `rollout scenario: ${TOTAL} rollouts × (start, 4 spans, succeed), ${CONCURRENCY} clients, builds: ${builds.map((b) => b.name).join(", ")}`,
  );
  for (let repeat = 0; PARTS.includes("rollout") && repeat < REPEATS; repeat++) {
    for (const backend of backends) {
      // before and after back to back, so both see the same machine load; which goes first alternates
      // (a run warms caches and the page cache for the next).
      for (const build of repeat % 2 === 0 ? builds : [...builds].reverse()) {
        const m = await measure(
          build,
          backend,
          async (base) => {
            await runPool(TOTAL, CONCURRENCY, (task) => pythonRollout(base, task));
          },
          (base) => checkRollouts(base, TOTAL),
        );
        const row: RolloutRow = {
          build: build.name,
          backend,
          repeat,
          rollouts_per_s: TOTAL / m.seconds,
          server_cpu_ms_per_rollout: m.server_cpu_ms / TOTAL,
          db_cpu_ms_per_rollout: m.db_cpu_ms / TOTAL,
          total_cpu_ms_per_rollout: (m.server_cpu_ms + m.db_cpu_ms) / TOTAL,
          requests_per_rollout: m.requests / TOTAL,
        };
        rolloutRows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  if (PARTS.includes("phases"))
    for (const backend of backends)
      for (const build of builds)
        phaseRows.push(
          ...(await phases(build, backend, {
            backends: backendsRun,
            rollouts: TOTAL,
            concurrency: CONCURRENCY,
          })),
        );
  for (const p of phaseRows) console.log(JSON.stringify(p));
  // Each repeat runs every backend of a build back to back, so "vs memory" compares runs seconds apart.
  for (let repeat = 0; PARTS.includes("otlp") && repeat < OTLP_REPEATS; repeat++) {
    for (const build of repeat % 2 === 0 ? builds : [...builds].reverse()) {
      for (const backend of repeat % 2 === 0 ? backends : [...backends].reverse()) {
        let times: number[] = [];
        const m = await measure(build, backend, async (base) => {
          times = await runPool(OTLP_ROLLOUTS, OTLP_RUNNERS, (task) => otlpRollout(base, task, OTLP_SPANS));
        });
        const perRollout = times.reduce((a, b) => a + b, 0) / times.length;
        const row: OtlpRow = {
          build: build.name,
          backend,
          repeat,
          seconds_per_rollout: perRollout,
          ms_per_span_request: (perRollout * 1000) / (OTLP_SPANS + 2),
          server_cpu_ms_per_rollout: m.server_cpu_ms / OTLP_ROLLOUTS,
          db_cpu_ms_per_rollout: m.db_cpu_ms / OTLP_ROLLOUTS,
        };
        otlpRows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  writeResults({
    root: ROOT,
    result: RESULT,
    builds,
    backends,
    parameters: {
      rollouts: TOTAL,
      concurrency: CONCURRENCY,
      repeats: REPEATS,
      otlp: {
        rollouts: OTLP_ROLLOUTS,
        spans_per_rollout: OTLP_SPANS,
        runners: OTLP_RUNNERS,
        repeats: OTLP_REPEATS,
      },
      baseline_root: BASELINE ?? null,
    },
    loadAtStart,
    rolloutRows,
    phaseRows,
    otlpRows,
  });
} finally {
  backendsRun.stop();
}
