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
 *     BENCH_BASELINE_ROOT, BENCH_ONLY=postgres,sqlite)
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LightningStoreClient } from "@agl/client";
import { startPostgresCluster } from "../test/support/postgres.js";
import { Connection, otlpRollout, pythonRollout, runPool } from "./support/rollout-scenario.js";
import { startCliServer } from "./support/server-process.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TOTAL = Number(process.env.BENCH_ROLLOUTS ?? 2048);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 2);
const OTLP_ROLLOUTS = Number(process.env.BENCH_OTLP_ROLLOUTS ?? 8);
const OTLP_SPANS = Number(process.env.BENCH_OTLP_SPANS ?? 200);
const OTLP_RUNNERS = Number(process.env.BENCH_OTLP_RUNNERS ?? 4);
const BASELINE = process.env.BENCH_BASELINE_ROOT;
const ONLY = (process.env.BENCH_ONLY ?? "").split(",").filter(Boolean);
/** Which parts to run (e.g. BENCH_PARTS=rollout while profiling); results are written only for a full run. */
const PARTS = (process.env.BENCH_PARTS ?? "rollout,phases,otlp").split(",");
/** Results file name under bench/results/ (a second baseline's run goes to its own file). */
const RESULT = process.env.BENCH_RESULT ?? "store-rollout";
/** The Python server's CPU per rollout and throughput on this scenario, as the issue reports them (not measured here). */
const PYTHON = { cpu_ms_per_rollout: [11.9, 13.0], rollouts_per_s: [66, 70] };

const CLK_TCK = 100;
const tmp = mkdtempSync(join(tmpdir(), "agl-bench-rollout-"));
const cluster = await startPostgresCluster({ durable: true });
const postmasterPid = Number(readFileSync(join(cluster.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);

/** CPU ms of every process of the PostgreSQL cluster: the postmaster, its children, and children reaped. */
function databaseCpuMs(): number {
  const stat = (pid: string) => {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    return text.slice(text.lastIndexOf(")") + 2).split(" ");
  };
  // Fields after the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
  const main = stat(String(postmasterPid));
  let ticks = Number(main[11]) + Number(main[12]) + Number(main[13]) + Number(main[14]);
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const f = stat(pid);
      if (Number(f[1]) === postmasterPid) ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return (ticks * 1000) / CLK_TCK;
}

let dbCounter = 0;
async function uriFor(backend: string): Promise<string> {
  if (backend === "memory") return "memory:";
  if (backend === "sqlite") return `sqlite:${join(tmp, `rollout-${dbCounter++}.db`)}`;
  const pg = (await import("pg")).default;
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  const name = `rollout_${dbCounter++}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(cluster.url);
  url.pathname = `/${name}`;
  return url.toString();
}

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
  const server = await startCliServer(build.root, await uriFor(backend));
  try {
    const base = new URL(server.url);
    const before = await server.usage();
    const db0 = databaseCpuMs();
    const t0 = performance.now();
    await work(base);
    const seconds = (performance.now() - t0) / 1000;
    const after = await server.usage();
    const db1 = databaseCpuMs();
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

interface Build {
  name: "before" | "after";
  /** A checkout whose packages are built: its agl-store CLI serves the runs. */
  root: string;
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

interface RolloutRow {
  build: string;
  backend: string;
  repeat: number;
  rollouts_per_s: number;
  server_cpu_ms_per_rollout: number;
  db_cpu_ms_per_rollout: number;
  total_cpu_ms_per_rollout: number;
  requests_per_rollout: number;
}
interface PhaseRow {
  build: string;
  backend: string;
  phase: string;
  requests: number;
  server_cpu_ms_per_request: number;
  db_cpu_ms_per_request: number;
}
interface OtlpRow {
  build: string;
  backend: string;
  seconds_per_rollout: number;
  ms_per_span_request: number;
  server_cpu_ms_per_rollout: number;
  db_cpu_ms_per_rollout: number;
}
const rolloutRows: RolloutRow[] = [];
const phaseRows: PhaseRow[] = [];
const otlpRows: OtlpRow[] = [];
const loadAtStart = loadavg();

/** The three request types as separate phases over the same rollouts, each measured on its own. */
async function phases(build: Build, backend: string): Promise<void> {
  const server = await startCliServer(build.root, await uriFor(backend));
  try {
    const base = new URL(server.url);
    const n = Math.min(TOTAL, 1024);
    const started: Array<{ rid: string; aid: string }> = [];
    const phase = async (
      name: string,
      requests: number,
      run: (conn: Connection, i: number) => Promise<void>,
    ) => {
      const before = await server.usage();
      const db0 = databaseCpuMs();
      const conns = Array.from({ length: CONCURRENCY }, () => new Connection(base));
      let next = 0;
      await Promise.all(
        conns.map(async (conn) => {
          while (next < requests) await run(conn, next++);
        }),
      );
      for (const c of conns) c.close();
      const after = await server.usage();
      const db = databaseCpuMs() - db0;
      phaseRows.push({
        build: build.name,
        backend,
        phase: name,
        requests,
        server_cpu_ms_per_request: (after.cpu_ms - before.cpu_ms) / requests,
        db_cpu_ms_per_request: backend === "postgres" ? db / requests : 0,
      });
    };
    await phase("start_rollout (POST /rollouts)", n, async (conn, i) => {
      const r = JSON.parse(
        await conn.post(
          "/v1/agl/rollouts",
          JSON.stringify({
            input: { task: i },
            mode: null,
            resources_id: null,
            config: null,
            metadata: null,
            worker_id: null,
          }),
        ),
      );
      started[i] = { rid: r.rollout_id, aid: r.attempt.attempt_id };
    });
    await phase("add_span (POST /spans)", n * 4, async (conn, j) => {
      const { rid, aid } = started[j >> 2]!;
      const seq = j + 1;
      const hex = seq.toString(16);
      await conn.post(
        "/v1/agl/spans",
        JSON.stringify({
          rollout_id: rid,
          attempt_id: aid,
          sequence_id: seq,
          trace_id: hex.padStart(32, "0"),
          span_id: hex.padStart(16, "0"),
          parent_id: null,
          name: `micro-span-${(j & 3) + 1}`,
          status: { status_code: "OK", description: null },
          attributes: { key: "v".repeat(150) },
          events: [],
          links: [],
          start_time: null,
          end_time: null,
          context: {
            trace_id: hex.padStart(32, "0"),
            span_id: hex.padStart(16, "0"),
            is_remote: false,
            trace_state: {},
          },
          parent: null,
          resource: { attributes: {}, schema_url: "" },
        }),
      );
    });
    await phase("update_attempt (POST /rollouts/{rid}/attempts/{aid})", n, async (conn, i) => {
      const { rid, aid } = started[i]!;
      await conn.post(`/v1/agl/rollouts/${rid}/attempts/${aid}`, JSON.stringify({ status: "succeeded" }));
    });
  } finally {
    await server.stop();
  }
}

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
    for (const backend of backends) for (const build of builds) await phases(build, backend);
  for (const p of phaseRows) console.log(JSON.stringify(p));
  for (const backend of PARTS.includes("otlp") ? backends : []) {
    for (const build of builds) {
      let times: number[] = [];
      const m = await measure(build, backend, async (base) => {
        times = await runPool(OTLP_ROLLOUTS, OTLP_RUNNERS, (task) => otlpRollout(base, task, OTLP_SPANS));
      });
      const perRollout = times.reduce((a, b) => a + b, 0) / times.length;
      const row: OtlpRow = {
        build: build.name,
        backend,
        seconds_per_rollout: perRollout,
        ms_per_span_request: (perRollout * 1000) / (OTLP_SPANS + 2),
        server_cpu_ms_per_rollout: m.server_cpu_ms / OTLP_ROLLOUTS,
        db_cpu_ms_per_rollout: m.db_cpu_ms / OTLP_ROLLOUTS,
      };
      otlpRows.push(row);
      console.log(JSON.stringify(row));
    }
  }
  writeResults();
} finally {
  cluster.stop();
  rmSync(tmp, { recursive: true, force: true });
}

function writeResults(): void {
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const summary = (build: string, backend: string) => {
    const rows = rolloutRows.filter((r) => r.build === build && r.backend === backend);
    if (rows.length === 0) return null;
    return {
      rollouts_per_s: mean(rows.map((r) => r.rollouts_per_s)),
      server: mean(rows.map((r) => r.server_cpu_ms_per_rollout)),
      db: mean(rows.map((r) => r.db_cpu_ms_per_rollout)),
      total: mean(rows.map((r) => r.total_cpu_ms_per_rollout)),
      requests: mean(rows.map((r) => r.requests_per_rollout)),
    };
  };
  const pyCpu = PYTHON.cpu_ms_per_rollout;
  const pyRate = PYTHON.rollouts_per_s;
  const f = (x: number, d = 2) => x.toFixed(d);
  const table = builds.flatMap((b) =>
    backends.flatMap((backend) => {
      const s = summary(b.name, backend);
      if (!s) return [];
      return [
        `| ${b.name} | ${backend} | ${f(s.rollouts_per_s, 0)} | ${f(s.server)} | ${backend === "postgres" ? f(s.db) : "-"} | ${f(s.total)} | ${f(s.total / pyCpu[1]!)}-${f(s.total / pyCpu[0]!)}x | ${f(s.rollouts_per_s / pyRate[1]!)}-${f(s.rollouts_per_s / pyRate[0]!)}x | ${f(s.requests)} |`,
      ];
    }),
  );
  const ratio = (backend: string) => {
    const before = summary("before", backend);
    const after = summary("after", backend);
    if (!before || !after) return [];
    return [
      `| ${backend} | ${f(after.total / before.total)}x | ${f(after.server / before.server)}x | ${f(after.rollouts_per_s / before.rollouts_per_s)}x |`,
    ];
  };
  const otlpBy = (build: string, backend: string) =>
    otlpRows.find((r) => r.build === build && r.backend === backend);
  const results = {
    benchmark: "Agent Lightning micro_benchmark.py `rollout` mode over HTTP; OTLP single-span runner",
    date: new Date().toISOString(),
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model, node: process.version },
    load_average_at_start: loadAtStart,
    load_average_at_end: loadavg(),
    parameters: {
      rollouts: TOTAL,
      concurrency: CONCURRENCY,
      repeats: REPEATS,
      otlp: { rollouts: OTLP_ROLLOUTS, spans_per_rollout: OTLP_SPANS, runners: OTLP_RUNNERS },
      baseline_root: BASELINE ?? null,
    },
    python_reference_from_issue: PYTHON,
    rollout: rolloutRows,
    phases: phaseRows,
    otlp: otlpRows,
  };
  writeFileSync(join(ROOT, `bench/results/${RESULT}.json`), `${JSON.stringify(results, null, 2)}\n`);
  const md = [
    "# Store `rollout` scenario (Agent Lightning micro_benchmark.py) and single-span OTLP runners",
    "",
    `${TOTAL} rollouts per run, each on a fresh connection: POST /v1/agl/rollouts (start_rollout), 4 × POST /v1/agl/spans`,
    `(the Python client's full Span dump, one random attribute of 5-300 chars), POST …/attempts/{aid} {"status":"succeeded"};`,
    `${CONCURRENCY} clients at once. The Python client cannot be installed on this machine (no PyPI), so`,
    "bench/support/rollout-scenario.ts sends the same requests in the same order. Measured: the store server process's",
    "CPU time and, for PostgreSQL, the CPU of every process of the database cluster (/proc: postmaster, backends,",
    "WAL writer, checkpointer, autovacuum), per rollout. PostgreSQL 15 with fsync and synchronous commit on.",
    `Load average at start ${loadAtStart.map((l) => l.toFixed(1)).join(" / ")}, at end ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} (2 shared cores).`,
    `Machine: ${availableParallelism()} cores (${cpus()[0]?.model}), Node ${process.version}. Mean of ${REPEATS} runs per row;`,
    BASELINE
      ? "`before` is the previous build (main before this change), `after` this one, run back to back in the same process."
      : "",
    "",
    `The Python server's figures are **not measured here**: ${pyCpu[0]}-${pyCpu[1]} ms CPU per rollout and ${pyRate[0]}-${pyRate[1]} rollouts/s`,
    "are the numbers issue 28 reports for Python Agent Lightning's in-memory server on this machine type (its own",
    "benchmark and client). The ratio columns divide by that range.",
    "",
    "| build | backend | rollouts/s | server CPU ms/rollout | database CPU ms/rollout | server+database ms/rollout | vs Python CPU | vs Python rollouts/s | requests/rollout |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ...table,
    "",
    ...(BASELINE
      ? [
          "After / before (same run):",
          "",
          "| backend | server+database CPU | server CPU | rollouts/s |",
          "|---|---:|---:|---:|",
          ...backends.flatMap(ratio),
          "",
        ]
      : []),
    "## Where the CPU goes, per request type",
    "",
    `Each request type as its own phase over ${Math.min(TOTAL, 1024)} rollouts (${CONCURRENCY} connections kept open per phase):`,
    "",
    "| build | backend | request | requests | server CPU ms/request | database CPU ms/request |",
    "|---|---|---|---:|---:|---:|",
    ...phaseRows.map(
      (p) =>
        `| ${p.build} | ${p.backend} | ${p.phase} | ${p.requests} | ${f(p.server_cpu_ms_per_request, 3)} | ${p.backend === "postgres" ? f(p.db_cpu_ms_per_request, 3) : "-"} |`,
    ),
    "",
    "## Single-span OTLP requests (a Python runner with OtelTracer)",
    "",
    `${OTLP_RUNNERS} runners at once, ${OTLP_ROLLOUTS} rollouts in all; each rollout: start_rollout, ${OTLP_SPANS} OTLP/protobuf`,
    "exports of one span each (no sequence id: the server assigns it), one after another, then the attempt succeeds.",
    "",
    "| build | backend | s per rollout | ms per request | vs memory (same build) | server CPU ms/rollout | database CPU ms/rollout |",
    "|---|---|---:|---:|---:|---:|---:|",
    ...otlpRows.map((r) => {
      const mem = otlpBy(r.build, "memory");
      return `| ${r.build} | ${r.backend} | ${f(r.seconds_per_rollout, 3)} | ${f(r.ms_per_span_request, 3)} | ${mem ? `${f(r.seconds_per_rollout / mem.seconds_per_rollout)}x` : "-"} | ${f(r.server_cpu_ms_per_rollout)} | ${r.backend === "postgres" ? f(r.db_cpu_ms_per_rollout) : "-"} |`;
    }),
    "",
  ].join("\n");
  writeFileSync(join(ROOT, `bench/results/${RESULT}.md`), md);
  console.log(md);
}
