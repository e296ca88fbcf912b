/**
 * A Python runner with OtelTracer against agl-store, on the REAL OpenTelemetry Python SDK: per rollout,
 * start_rollout, BENCH_SPANS spans each exported by the SDK's OTLP/HTTP protobuf exporter as it ends (one
 * request per span, as SimpleSpanProcessor does), then the attempt succeeds
 * (bench/support/otel_python_runner.py). Time per rollout on memory, SQLite and PostgreSQL (one durable
 * cluster: fsync and synchronous commit on), the backends interleaved in every repeat, plus the server's
 * and the database's CPU per rollout. Every run checks that all spans were stored.
 *
 *   BENCH_PYTHON=/usr/bin/python3 PYTHONPATH=<opentelemetry-python packages> pnpm exec tsx bench/store-otlp-python.ts
 *     (env: BENCH_ROLLOUTS=10, BENCH_SPANS=200, BENCH_REPEATS=3)
 *
 * The SDK is not a dependency of this repository (no PyPI here): point PYTHONPATH at its packages
 * (opentelemetry-api, -sdk, -semantic-conventions, -proto, -exporter-otlp-proto-http, -exporter-otlp-proto-common;
 * protobuf and requests from the system). Without them the bench says so and exits without a result.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBenchBackends } from "./support/bench-backends.js";
import { median } from "./support/median.js";
import { startCliServer } from "./support/server-process.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PYTHON = process.env.BENCH_PYTHON ?? "python3";
const ROLLOUTS = Number(process.env.BENCH_ROLLOUTS ?? 10);
const SPANS = Number(process.env.BENCH_SPANS ?? 200);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const DRIVER = join(ROOT, "bench/support/otel_python_runner.py");

const probe = spawnSync(
  PYTHON,
  ["-c", "import opentelemetry.exporter.otlp.proto.http.trace_exporter, opentelemetry.sdk.trace, requests"],
  {
    encoding: "utf8",
  },
);
if (probe.status !== 0) {
  console.log(
    `skipped: ${PYTHON} cannot import the OpenTelemetry Python SDK and its OTLP/HTTP exporter (${(probe.stderr || probe.error?.message || "").trim().split("\n").pop()}); set BENCH_PYTHON and PYTHONPATH`,
  );
  process.exit(0);
}
const sdkVersion = spawnSync(
  PYTHON,
  ["-c", "from opentelemetry.sdk.version import __version__; print(__version__)"],
  {
    encoding: "utf8",
  },
).stdout.trim();

interface Run {
  backend: string;
  repeat: number;
  /** Wall seconds of each rollout, as the Python runner measured them. */
  seconds: number[];
  server_cpu_ms: number;
  db_cpu_ms: number;
}

async function runOnce(
  backends: Awaited<ReturnType<typeof startBenchBackends>>,
  backend: string,
  repeat: number,
): Promise<Run> {
  const server = await startCliServer(ROOT, await backends.uriFor(backend));
  try {
    const cpu0 = (await server.usage()).cpu_ms;
    const db0 = backends.databaseCpuMs();
    const out = spawnSync(
      PYTHON,
      [
        DRIVER,
        "--url",
        server.url,
        "--rollouts",
        String(ROLLOUTS),
        "--spans",
        String(SPANS),
        "--seed",
        String(repeat + 1),
      ],
      { encoding: "utf8", maxBuffer: 1 << 24 },
    );
    if (out.status !== 0) throw new Error(`python runner failed on ${backend}: ${out.stderr}`);
    const cpu1 = (await server.usage()).cpu_ms;
    const db1 = backends.databaseCpuMs();
    const result = JSON.parse(out.stdout.trim().split("\n").pop()!) as { seconds: number[] };
    const stats = (await (await fetch(new URL("/v1/agl/statistics", server.url))).json()) as {
      total_spans: number;
    };
    if (stats.total_spans !== ROLLOUTS * SPANS)
      throw new Error(`${backend}: ${stats.total_spans} spans stored, expected ${ROLLOUTS * SPANS}`);
    return {
      backend,
      repeat,
      seconds: result.seconds,
      server_cpu_ms: cpu1 - cpu0,
      db_cpu_ms: backend === "postgres" ? db1 - db0 : 0,
    };
  } finally {
    await server.stop();
  }
}

const backends = await startBenchBackends();
const loadStart = loadavg();
const runs: Run[] = [];
const names = ["memory", "sqlite", "postgres"];
try {
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    // The order rotates, so no backend always runs first (cold caches) or last.
    const order = names.map((_, i) => names[(i + repeat) % names.length]!);
    for (const backend of order) {
      const run = await runOnce(backends, backend, repeat);
      runs.push(run);
      console.log(
        `repeat ${repeat} ${backend}: median ${(1000 * median(run.seconds)).toFixed(0)} ms per rollout, server ${(run.server_cpu_ms / ROLLOUTS).toFixed(0)} ms CPU, db ${(run.db_cpu_ms / ROLLOUTS).toFixed(0)} ms CPU per rollout`,
      );
    }
  }
} finally {
  backends.stop();
}
const loadEnd = loadavg();

const of = (backend: string, repeat?: number) =>
  runs.filter((r) => r.backend === backend && (repeat === undefined || r.repeat === repeat));
const perRollout = (backend: string, repeat?: number) =>
  median(of(backend, repeat).flatMap((r) => r.seconds));
const ratios = (backend: string) =>
  Array.from({ length: REPEATS }, (_, k) => perRollout(backend, k) / perRollout("memory", k));
const cpu = (backend: string, key: "server_cpu_ms" | "db_cpu_ms") =>
  of(backend).reduce((a, r) => a + r[key], 0) / (ROLLOUTS * REPEATS);

const rows = names.map((b) => {
  const r = ratios(b);
  return `| ${b} | ${(1000 * perRollout(b)).toFixed(0)} | ${r.map((x) => x.toFixed(2)).join(" / ")} | ${cpu(b, "server_cpu_ms").toFixed(0)} | ${b === "postgres" ? cpu(b, "db_cpu_ms").toFixed(0) : "–"} |`;
});
const pgRatios = ratios("postgres");
const md = `# A Python runner with OtelTracer, on the real OpenTelemetry Python SDK (bench/store-otlp-python.ts)

${new Date().toISOString()}, 2 cores, load average ${loadStart.map((x) => x.toFixed(2)).join(" ")} before / ${loadEnd.map((x) => x.toFixed(2)).join(" ")} after.
OpenTelemetry Python SDK ${sdkVersion} (TracerProvider, SimpleSpanProcessor, OTLPSpanExporter over HTTP/protobuf: one
request per span as it ends), ${PYTHON}. Per rollout: start_rollout, ${SPANS} spans, the attempt succeeds. ${ROLLOUTS} rollouts per
run, ${REPEATS} repeats, backends interleaved (order rotating); every run checked that all ${ROLLOUTS * SPANS} spans were stored.
PostgreSQL: one durable cluster (fsync and synchronous commit on), a fresh database per run; an OTLP 200 means committed.

| backend | median ms per rollout | vs memory, per repeat | server CPU ms per rollout | database CPU ms per rollout |
| --- | ---: | --- | ---: | ---: |
${rows.join("\n")}

Goal (issue: 200 single-span OTLP requests per rollout on PostgreSQL within 1.5x the memory backend's time per rollout):
PostgreSQL / memory = ${pgRatios.map((x) => x.toFixed(2)).join(", ")} per repeat (median ${median(pgRatios).toFixed(2)}); within 1.5x in ${pgRatios.filter((x) => x <= 1.5).length} of ${REPEATS} repeats: **${pgRatios.every((x) => x <= 1.5) ? "met" : "not met"}**.
Raw per-rollout times: \`store-otlp-python.json\`.
`;
writeFileSync(join(ROOT, "bench/results/store-otlp-python.md"), md);
writeFileSync(
  join(ROOT, "bench/results/store-otlp-python.json"),
  `${JSON.stringify({ sdkVersion, rollouts: ROLLOUTS, spans: SPANS, repeats: REPEATS, loadStart, loadEnd, runs }, null, 2)}\n`,
);
console.log(md);
