/**
 * The PostgreSQL store against the memory store in one run, over TCP loopback (what the docs show:
 * `postgres://user@host/db`) and over the cluster's Unix-domain socket (`?host=/socket/dir`, what a
 * store on the database's own machine can use), interleaved repeat by repeat:
 *   - otlp: BENCH_OTLP_ROLLOUTS rollouts of one runner, each start_rollout, BENCH_OTLP_SPANS
 *     single-span OTLP/protobuf exports one after another (no sequence id), succeed (issue 30);
 *   - rollout: Agent Lightning's `rollout` scenario, BENCH_ROLLOUTS rollouts from 32 clients
 *     (start, 4 add_span, succeed; a fresh connection per rollout) (issue 28);
 *   - update: BENCH_UPDATE_ROLLOUTS rollouts one after another, each start_rollout then
 *     update_attempt succeeded (no batching: each write is a transaction of its own).
 * Measured: time, the agl-store CLI process's CPU, and the CPU of every process of the (durable:
 * fsync and synchronous commit on) PostgreSQL cluster, with the load average beside each row.
 * With BENCH_BASELINE_ROOT=<built checkout> the same runs are made against that build too.
 *
 *   pnpm exec tsx bench/store-pg-connection.ts   (env: BENCH_REPEATS=6, BENCH_OTLP_ROLLOUTS=2,
 *     BENCH_OTLP_SPANS=200, BENCH_ROLLOUTS=1024, BENCH_UPDATE_ROLLOUTS=300, BENCH_PARTS=otlp,rollout,update, BENCH_BACKENDS=memory,postgres,postgres-socket, BENCH_BASELINE_ROOT,
 *     BENCH_RESULT=store-rollout-s8-pg)
 */
import { readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startPostgresCluster } from "../test/support/postgres.js";
import { clusterCpuMs } from "./support/bench-backends.js";
import { median } from "./support/median.js";
import { otlpRollout, pythonRollout, runPool } from "./support/rollout-scenario.js";
import { startCliServer } from "./support/server-process.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const REPEATS = Number(process.env.BENCH_REPEATS ?? 6);
const OTLP_ROLLOUTS = Number(process.env.BENCH_OTLP_ROLLOUTS ?? 2);
const OTLP_SPANS = Number(process.env.BENCH_OTLP_SPANS ?? 200);
const ROLLOUTS = Number(process.env.BENCH_ROLLOUTS ?? 1024);
const UPDATE_ROLLOUTS = Number(process.env.BENCH_UPDATE_ROLLOUTS ?? 300);
const CONCURRENCY = 32;
const PARTS = (process.env.BENCH_PARTS ?? "otlp,rollout,update").split(",");
const RESULT = process.env.BENCH_RESULT ?? "store-rollout-s8-pg";
const BASELINE = process.env.BENCH_BASELINE_ROOT;

const cluster = await startPostgresCluster({ durable: true });
const postmaster = Number(readFileSync(join(cluster.dataDir, "postmaster.pid"), "utf8").split("\n")[0]);
const socketDir = dirname(cluster.dataDir);
const port = new URL(cluster.url).port;

const databaseCpuMs = (): number => clusterCpuMs(postmaster);

let databases = 0;
/** A fresh store URI: memory, or a new database reached over TCP or the Unix socket. */
async function uriFor(backend: string): Promise<string> {
  if (backend === "memory") return "memory:";
  const name = `bench_${databases++}`;
  const admin = new pg.Client({ connectionString: cluster.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return backend === "postgres-socket"
    ? `postgres://postgres@localhost:${port}/${name}?host=${encodeURIComponent(socketDir)}`
    : `postgres://postgres@127.0.0.1:${port}/${name}`;
}

interface Row {
  part: string;
  build: string;
  backend: string;
  repeat: number;
  seconds: number;
  per_rollout_s: number;
  server_cpu_ms_per_rollout: number;
  db_cpu_ms_per_rollout: number;
  load1: number;
}

const builds = [...(BASELINE ? [{ name: "before", root: BASELINE }] : []), { name: "after", root: ROOT }];
const backends = (process.env.BENCH_BACKENDS ?? "memory,postgres,postgres-socket").split(",");
const rows: Row[] = [];
const loadAtStart = loadavg();

async function run(part: string, build: { name: string; root: string }, backend: string, repeat: number) {
  const server = await startCliServer(build.root, await uriFor(backend));
  try {
    const base = new URL(server.url);
    const cpu0 = (await server.usage()).cpu_ms;
    const db0 = databaseCpuMs();
    const t0 = performance.now();
    let perRollout: number;
    let n: number;
    if (part === "otlp") {
      const times = await runPool(OTLP_ROLLOUTS, 1, (task) => otlpRollout(base, task, OTLP_SPANS));
      perRollout = times.reduce((a, b) => a + b, 0) / times.length;
      n = OTLP_ROLLOUTS;
    } else if (part === "update") {
      await runPool(UPDATE_ROLLOUTS, 1, (task) => pythonRollout(base, task, 0));
      n = UPDATE_ROLLOUTS;
      perRollout = (performance.now() - t0) / 1000 / n;
    } else {
      await runPool(ROLLOUTS, CONCURRENCY, (task) => pythonRollout(base, task));
      n = ROLLOUTS;
      perRollout = (performance.now() - t0) / 1000 / n;
    }
    const seconds = (performance.now() - t0) / 1000;
    const cpu = (await server.usage()).cpu_ms - cpu0;
    const db = backend === "memory" ? 0 : databaseCpuMs() - db0;
    const row: Row = {
      part,
      build: build.name,
      backend,
      repeat,
      seconds,
      per_rollout_s: perRollout,
      server_cpu_ms_per_rollout: cpu / n,
      db_cpu_ms_per_rollout: db / n,
      load1: loadavg()[0]!,
    };
    rows.push(row);
    console.log(JSON.stringify(row));
  } finally {
    await server.stop();
  }
}

try {
  for (let repeat = 0; repeat < REPEATS; repeat++)
    // Which backend goes first alternates: a run warms the page cache for the next.
    for (const part of PARTS)
      for (const build of repeat % 2 === 0 ? builds : [...builds].reverse())
        for (const backend of repeat % 2 === 0 ? backends : [...backends].reverse())
          await run(part, build, backend, repeat);
} finally {
  cluster.stop();
}

const find = (part: string, build: string, backend: string, repeat: number) =>
  rows.find((r) => r.part === part && r.build === build && r.backend === backend && r.repeat === repeat);
const lines: string[] = [
  "# PostgreSQL store vs memory, TCP loopback vs Unix socket (session 8)",
  "",
  `Command: \`BENCH_REPEATS=${REPEATS} BENCH_OTLP_ROLLOUTS=${OTLP_ROLLOUTS} BENCH_ROLLOUTS=${ROLLOUTS} BENCH_UPDATE_ROLLOUTS=${UPDATE_ROLLOUTS} BENCH_PARTS=${PARTS.join(",")}${BASELINE ? " BENCH_BASELINE_ROOT=…" : ""} nice -n 10 pnpm exec tsx bench/store-pg-connection.ts\``,
  `(raw rows: ${RESULT}.json). PostgreSQL 15, durable (fsync, synchronous_commit on), one cluster; each run a fresh`,
  "database and a fresh agl-store CLI process (default flags). Backends and builds interleaved within each repeat,",
  "order alternating. Load average (1/5/15 min) at start " +
    loadAtStart.map((l) => l.toFixed(1)).join(" / ") +
    `, at end ${loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")}; 2 cores shared with other engineers' jobs.`,
  "",
];
for (const part of PARTS) {
  lines.push(
    part === "otlp"
      ? `## Single-span OTLP runner (issue 30): ${OTLP_SPANS} exports per rollout, one runner, ${OTLP_ROLLOUTS} rollouts per run`
      : part === "update"
        ? `## start_rollout then update_attempt, one client, ${UPDATE_ROLLOUTS} rollouts one after another (each write its own transaction)`
        : `## \`rollout\` scenario (issue 28): ${ROLLOUTS} rollouts, ${CONCURRENCY} clients`,
    "",
    "| build | backend | repeat | s/rollout | vs memory (same repeat) | server CPU ms/rollout | database CPU ms/rollout | server+database | rollouts/s | load 1 min |",
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const r of rows.filter((x) => x.part === part)) {
    const mem = find(part, r.build, "memory", r.repeat);
    lines.push(
      `| ${r.build} | ${r.backend} | ${r.repeat} | ${r.per_rollout_s.toFixed(4)} | ${mem ? (r.per_rollout_s / mem.per_rollout_s).toFixed(2) : "-"}x | ${r.server_cpu_ms_per_rollout.toFixed(2)} | ${r.db_cpu_ms_per_rollout.toFixed(2)} | ${(r.server_cpu_ms_per_rollout + r.db_cpu_ms_per_rollout).toFixed(2)} | ${(1 / r.per_rollout_s).toFixed(1)} | ${r.load1.toFixed(1)} |`,
    );
  }
  lines.push("", "Medians over the repeats:", "");
  lines.push(
    "| build | backend | vs memory (each repeat) | median vs memory | server CPU | database CPU | server+database | rollouts/s |",
    "|---|---|---|---:|---:|---:|---:|---:|",
  );
  for (const build of builds)
    for (const backend of backends) {
      const rs = rows.filter((x) => x.part === part && x.build === build.name && x.backend === backend);
      if (rs.length === 0) continue;
      const ratios = rs.map((r) => r.per_rollout_s / find(part, r.build, "memory", r.repeat)!.per_rollout_s);
      lines.push(
        `| ${build.name} | ${backend} | ${ratios
          .sort((a, b) => a - b)
          .map((x) => x.toFixed(2))
          .join(
            ", ",
          )} | ${median(ratios).toFixed(2)}x | ${median(rs.map((r) => r.server_cpu_ms_per_rollout)).toFixed(2)} | ${median(rs.map((r) => r.db_cpu_ms_per_rollout)).toFixed(2)} | ${median(rs.map((r) => r.server_cpu_ms_per_rollout + r.db_cpu_ms_per_rollout)).toFixed(2)} | ${median(rs.map((r) => 1 / r.per_rollout_s)).toFixed(1)} |`,
      );
    }
  lines.push("");
}
writeFileSync(join(ROOT, "bench/results", `${RESULT}.md`), `${lines.join("\n")}\n`);
writeFileSync(
  join(ROOT, "bench/results", `${RESULT}.json`),
  `${JSON.stringify({ loadAtStart, loadAtEnd: loadavg(), rows }, null, 2)}\n`,
);
process.exit(0);
