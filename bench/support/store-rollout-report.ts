/**
 * The results of bench/store-rollout.ts: its row types, and the JSON and Markdown files written under
 * bench/results/ (the tables, the after/before ratios, and single-span OTLP time per rollout against
 * the memory backend of the same build and repeat).
 */
import { writeFileSync } from "node:fs";
import { availableParallelism, cpus, loadavg } from "node:os";
import { join } from "node:path";

export interface Build {
  name: "before" | "after";
  /** A checkout whose packages are built: its agl-store CLI serves the runs. */
  root: string;
}
export interface RolloutRow {
  build: string;
  backend: string;
  repeat: number;
  rollouts_per_s: number;
  server_cpu_ms_per_rollout: number;
  db_cpu_ms_per_rollout: number;
  total_cpu_ms_per_rollout: number;
  requests_per_rollout: number;
}
export interface PhaseRow {
  build: string;
  backend: string;
  phase: string;
  requests: number;
  server_cpu_ms_per_request: number;
  db_cpu_ms_per_request: number;
}
export interface OtlpRow {
  build: string;
  backend: string;
  repeat: number;
  seconds_per_rollout: number;
  ms_per_span_request: number;
  server_cpu_ms_per_rollout: number;
  db_cpu_ms_per_rollout: number;
}

/** The Python server's CPU per rollout and throughput on this scenario, as issue 28 reports them (not measured here). */
export const PYTHON = { cpu_ms_per_rollout: [11.9, 13.0], rollouts_per_s: [66, 70] };

export interface BenchRun {
  root: string;
  result: string;
  builds: Build[];
  backends: string[];
  parameters: {
    rollouts: number;
    concurrency: number;
    repeats: number;
    otlp: { rollouts: number; spans_per_rollout: number; runners: number; repeats: number };
    baseline_root: string | null;
  };
  loadAtStart: number[];
  rolloutRows: RolloutRow[];
  phaseRows: PhaseRow[];
  otlpRows: OtlpRow[];
}

export function writeResults(run: BenchRun): void {
  const { builds, backends, rolloutRows, phaseRows, otlpRows, loadAtStart } = run;
  const { rollouts: TOTAL, concurrency: CONCURRENCY, repeats: REPEATS } = run.parameters;
  const {
    rollouts: OTLP_ROLLOUTS,
    spans_per_rollout: OTLP_SPANS,
    runners: OTLP_RUNNERS,
  } = run.parameters.otlp;
  const BASELINE = run.parameters.baseline_root;
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
  const otlpBy = (build: string, backend: string, repeat: number) =>
    otlpRows.find((r) => r.build === build && r.backend === backend && r.repeat === repeat);
  // Per backend and build: the ratio to the memory backend of the same build and repeat, each repeat.
  const otlpRatios = builds.flatMap((b) =>
    backends
      .filter((backend) => backend !== "memory")
      .flatMap((backend) => {
        const ratios = otlpRows
          .filter((r) => r.build === b.name && r.backend === backend)
          .flatMap((r) => {
            const mem = otlpBy(b.name, "memory", r.repeat);
            return mem ? [r.seconds_per_rollout / mem.seconds_per_rollout] : [];
          })
          .sort((x, y) => x - y);
        if (ratios.length === 0) return [];
        const median = ratios[Math.floor((ratios.length - 1) / 2)]!;
        return [
          `| ${b.name} | ${backend} | ${ratios.length} | ${f(median)}x | ${ratios.map((x) => f(x)).join(", ")} |`,
        ];
      }),
  );
  const results = {
    benchmark: "Agent Lightning micro_benchmark.py `rollout` mode over HTTP; OTLP single-span runner",
    date: new Date().toISOString(),
    machine: { cores: availableParallelism(), cpu: cpus()[0]?.model, node: process.version },
    load_average_at_start: loadAtStart,
    load_average_at_end: loadavg(),
    parameters: run.parameters,
    python_reference_from_issue: PYTHON,
    rollout: rolloutRows,
    phases: phaseRows,
    otlp: otlpRows,
  };
  writeFileSync(join(run.root, `bench/results/${run.result}.json`), `${JSON.stringify(results, null, 2)}\n`);
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
    "| build | backend | repeat | s per rollout | ms per request | vs memory (same build, repeat) | server CPU ms/rollout | database CPU ms/rollout |",
    "|---|---|---:|---:|---:|---:|---:|---:|",
    ...otlpRows.map((r) => {
      const mem = otlpBy(r.build, "memory", r.repeat);
      return `| ${r.build} | ${r.backend} | ${r.repeat} | ${f(r.seconds_per_rollout, 3)} | ${f(r.ms_per_span_request, 3)} | ${mem ? `${f(r.seconds_per_rollout / mem.seconds_per_rollout)}x` : "-"} | ${f(r.server_cpu_ms_per_rollout)} | ${r.backend === "postgres" ? f(r.db_cpu_ms_per_rollout) : "-"} |`;
    }),
    "",
    "Time per rollout / the memory backend's, same build and repeat (the backends run back to back):",
    "",
    "| build | backend | repeats | median | each repeat |",
    "|---|---|---:|---:|---|",
    ...otlpRatios,
    "",
  ].join("\n");
  writeFileSync(join(run.root, `bench/results/${run.result}.md`), md);
  console.log(md);
}
