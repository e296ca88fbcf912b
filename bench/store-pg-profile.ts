/**
 * Where the database's time goes in one single-span OTLP export on PostgreSQL: a durable cluster
 * (fsync and synchronous commit on) started with pg_stat_statements (track = all: the statements
 * inside agl_ingest_attempt_spans too) and track_functions = all. One connection makes BENCH_CALLS
 * exports of one span each to one attempt (as a Python runner with OtelTracer does) and, for the
 * floor of a call, as many `SELECT 1` (no commit) and single-row INSERTs (a commit each); and the
 * same export through the store (group commit, pool, parsing). Prints the CPU per call of the whole
 * cluster and of this process (/proc, process.cpuUsage) and the statements' share of the export's time.
 *
 *   pnpm exec tsx bench/store-pg-profile.ts   (env: BENCH_CALLS=2000, BENCH_FN=agl_ingest_attempt_spans)
 */
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { callForOneAttempt, callForOneSpan } from "../packages/store/src/postgres/pg-span-ingest.js";
import { PostgresLightningStore } from "../packages/store/src/postgres/postgres-store.js";
import { startPostgresCluster } from "../test/support/postgres.js";
import { benchSpan } from "./store-pg-span.js";

const CALLS = Number(process.env.BENCH_CALLS ?? 2000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
/** BENCH_STATS=0: no pg_stat_statements (its hooks cost CPU too), for the CPU comparison alone. */
const STATS = process.env.BENCH_STATS !== "0";
const cluster = await startPostgresCluster({
  durable: true,
  settings: STATS
    ? ["shared_preload_libraries=pg_stat_statements", "pg_stat_statements.track=all", "track_functions=all"]
    : [],
});

const postmaster = readFileSync(join(cluster.dataDir, "postmaster.pid"), "utf8").split("\n")[0]!;
/** CPU ms of every process of the cluster (backends, WAL writer, …; the one serving a call included). */
const clusterCpuMs = (): number => {
  let ticks = 0;
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const text = readFileSync(`/proc/${pid}/stat`, "utf8");
      const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
      if (f[1] === postmaster) ticks += Number(f[11]) + Number(f[12]);
      // The postmaster with its reaped children: a backend that exits keeps counting.
      if (pid === postmaster) ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return (ticks * 1000) / 100;
};

const span = (rid: string, aid: string, i: number) => benchSpan(rid, aid, `s${i}`.padStart(16, "0"), 150);

const store = await PostgresLightningStore.connect(cluster.url, { listen: false, watchdog: false });
await store.close();
const c = new pg.Client({ connectionString: cluster.url, options: "-c search_path=public" });
await c.connect();
if (STATS) await c.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
await c.query("CREATE TABLE IF NOT EXISTS floor_rows (pk bigserial PRIMARY KEY, v text)");

async function perCall(name: string, call: (i: number) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 50; i++) await call(-1 - i);
  const cpu0 = clusterCpuMs();
  const node0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < CALLS; i++) await call(i);
  const wall = (performance.now() - t0) / CALLS;
  const node = process.cpuUsage(node0);
  console.log(
    JSON.stringify({
      name,
      database_cpu_ms: (clusterCpuMs() - cpu0) / CALLS,
      node_cpu_ms: (node.user + node.system) / 1000 / CALLS,
      wall_ms: wall,
      load: loadavg()[0],
    }),
  );
}

console.log(
  `${CALLS} calls each, one connection; load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")}`,
);
// One store for the whole run (it also starts the rollouts of the direct calls, 200 spans each, as
// the OTLP runner makes them): no connection is opened or closed while a variant is measured.
const viaStore = await PostgresLightningStore.connect(cluster.url, { listen: false, watchdog: false });
let target = { rid: "", aid: "" };
let serial = 0;
const exportWith =
  (fn: typeof callForOneSpan) =>
  async (i: number): Promise<void> => {
    if (i < 0 || i % 200 === 0) {
      const r = await viaStore.startRollout({ input: i });
      target = { rid: r.rollout_id, aid: r.attempt.attempt_id };
    }
    const entry = { span: span(target.rid, target.aid, serial++), assign: true };
    const rows = await fn(c, entry, Date.now() / 1000);
    if (rows.length !== 1 || rows[0]!.o_rid === null) throw new Error(`not stored: ${JSON.stringify(rows)}`);
  };
// The same export through the store (group commit, pool, span parsing, bookkeeping): the server's
// share of a request beyond the call itself.
let storeTarget = { rid: "", aid: "" };
const exportViaStore = async (i: number): Promise<void> => {
  if (i < 0 || i % 200 === 0) {
    const r = await viaStore.startRollout({ input: i });
    storeTarget = { rid: r.rollout_id, aid: r.attempt.attempt_id };
  }
  const stored = await viaStore.addManySpansAssigningSequences(
    [span(storeTarget.rid, storeTarget.aid, serial++)],
    [true],
  );
  if (stored.length !== 1) throw new Error("not stored");
};
for (let round = 0; round < ROUNDS; round++) {
  await perCall("SELECT 1", () => c.query({ name: "one", text: "SELECT 1" }));
  await perCall("INSERT one row (commit)", (i) =>
    c.query({ name: "ins", text: "INSERT INTO floor_rows (v) VALUES ($1)", values: [`v${i}`] }),
  );
  const variants = {
    "single-span export, agl_ingest_attempt_spans (v4)": exportWith((cl, e, now) =>
      callForOneAttempt(cl, [e], now),
    ),
    "single-span export, agl_ingest_one_span (v6)": exportWith(callForOneSpan),
    "single-span export through the store (v6)": exportViaStore,
  };
  const names = Object.keys(variants) as Array<keyof typeof variants>;
  for (const name of round % 2 === 0 ? names : names.reverse()) await perCall(name, variants[name]);
}
if (STATS) {
  const { rows } = await c.query(
    `SELECT calls, round(total_exec_time::numeric / calls * 1000, 1) AS us_per_call, round(total_plan_time::numeric / greatest(calls, 1) * 1000, 1) AS plan_us, toplevel,
     left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS query
   FROM pg_stat_statements WHERE calls >= ${CALLS} ORDER BY total_exec_time DESC LIMIT 20`,
  );
  console.table(rows);
  const fns = await c.query(
    "SELECT funcname, calls, round((total_time / calls * 1000)::numeric, 1) AS total_us, round((self_time / calls * 1000)::numeric, 1) AS self_us FROM pg_stat_user_functions WHERE calls > 0",
  );
  console.table(fns.rows);
}
await c.end();
await viaStore.close();
cluster.stop();
process.exit(0);
