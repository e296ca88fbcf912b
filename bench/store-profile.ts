/**
 * Where the CPU of the PostgreSQL store goes on Agent Lightning's `rollout` scenario and on
 * single-span OTLP requests: the store server runs under `--cpu-prof` (self time summed by function
 * and by package), the database under pg_stat_statements (per statement: calls, execution time,
 * rows, per rollout). Durable cluster (fsync and synchronous commit on), as in store-rollout.ts.
 *
 *   pnpm --filter "@agl/store..." build && pnpm exec tsx bench/store-profile.ts
 *     (env: PROFILE_ROOT=<built checkout, default this one>, PROFILE_ROLLOUTS=512,
 *      PROFILE_CONCURRENCY=32, PROFILE_OTLP_ROLLOUTS=2, PROFILE_OTLP_SPANS=200)
 */
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { startPostgresCluster } from "../test/support/postgres.js";
import { otlpRollout, pythonRollout, runPool } from "./support/rollout-scenario.js";
import { startCliServer } from "./support/server-process.js";

const ROOT = process.env.PROFILE_ROOT ?? fileURLToPath(new URL("..", import.meta.url));
const ROLLOUTS = Number(process.env.PROFILE_ROLLOUTS ?? 512);
const CONCURRENCY = Number(process.env.PROFILE_CONCURRENCY ?? 32);
const OTLP_ROLLOUTS = Number(process.env.PROFILE_OTLP_ROLLOUTS ?? 2);
const OTLP_SPANS = Number(process.env.PROFILE_OTLP_SPANS ?? 200);

const cluster = await startPostgresCluster({
  durable: true,
  settings: [
    "shared_preload_libraries=pg_stat_statements",
    "pg_stat_statements.track_utility=on",
    "pg_stat_statements.track_planning=on",
    // The statements inside agl_ingest_spans too, not only its call.
    "pg_stat_statements.track=all",
  ],
});
const admin = new pg.Client({ connectionString: cluster.url });
await admin.connect();
await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
console.log(
  `profile of ${ROOT}; load average at start ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")}`,
);

interface CpuProfile {
  nodes: Array<{ id: number; callFrame: { functionName: string; url: string; lineNumber: number } }>;
  samples: number[];
  timeDeltas: number[];
}

/** What a profile frame belongs to, by its script. */
function packageOf(url: string, fn: string): string {
  if (url === "") return fn.startsWith("(") ? fn : "(native)";
  if (url.startsWith("node:")) return `node:${url.slice(5).split("/")[0]}`;
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const m = /packages\/([^/]+)\//.exec(url);
  return m ? `@agl/${m[1]}` : url;
}

/** Self time (ms) by package and by function, from a .cpuprofile. */
function summarize(file: string, per: number, unit: string): void {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  for (const [i, id] of profile.samples.entries())
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0) / 1000);
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const [id, ms] of self) {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    if (functionName === "(idle)") continue;
    total += ms;
    const pkg = packageOf(url, functionName);
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + ms);
    const f = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
    byFunction.set(f, (byFunction.get(f) ?? 0) + ms);
  }
  const table = (title: string, m: Map<string, number>, n: number) => {
    console.log(`\n| ${title} | self ms/${unit} | share |\n|---|---:|---:|`);
    for (const [k, ms] of [...m].sort((a, b) => b[1] - a[1]).slice(0, n))
      console.log(
        `| ${k.replaceAll("|", "\\|")} | ${(ms / per).toFixed(3)} | ${((100 * ms) / total).toFixed(1)}% |`,
      );
  };
  console.log(`\nserver busy (non-idle) samples: ${(total / per).toFixed(2)} ms/${unit}`);
  table("package (self time)", byPackage, 20);
  table("function (self time)", byFunction, 30);
}

async function statements(per: number, unit: string): Promise<void> {
  const { rows } = await admin.query<{
    query: string;
    calls: string;
    total: number;
    plan: number;
    rows: string;
  }>(
    `SELECT regexp_replace(query, '\\s+', ' ', 'g') AS query, calls, total_exec_time AS total,
       total_plan_time AS plan, rows
     FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
     ORDER BY total_exec_time DESC LIMIT 25`,
  );
  const sum = rows.reduce((s, r) => s + r.total, 0);
  console.log(
    `\n| statement | calls/${unit} | exec ms/${unit} | plan ms/${unit} | share of exec | rows/call |\n|---|---:|---:|---:|---:|---:|`,
  );
  for (const r of rows) {
    const q = r.query.length > 140 ? `${r.query.slice(0, 140)}…` : r.query;
    console.log(
      `| \`${q.replaceAll("|", "\\|")}\` | ${(Number(r.calls) / per).toFixed(2)} | ${(r.total / per).toFixed(3)} | ${(r.plan / per).toFixed(3)} | ${((100 * r.total) / sum).toFixed(1)}% | ${(Number(r.rows) / Number(r.calls)).toFixed(1)} |`,
    );
  }
}

async function profiled(
  title: string,
  per: number,
  unit: string,
  work: (base: URL) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "agl-store-prof-"));
  process.env.BENCH_SERVER_NODE_ARGS = `--cpu-prof --cpu-prof-dir=${dir}`;
  // The store's own database (its schema in `public`), reset statistics once it is migrated.
  const server = await startCliServer(ROOT, cluster.url);
  await admin.query("SELECT pg_stat_statements_reset()");
  const t0 = performance.now();
  const cpu0 = (await server.usage()).cpu_ms;
  await work(new URL(server.url));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = (await server.usage()).cpu_ms - cpu0;
  console.log(
    `\n## ${title}\n\n${(seconds / per).toFixed(4)} s/${unit}; server CPU ${(cpu / per).toFixed(2)} ms/${unit}`,
  );
  await statements(per, unit);
  await server.stop();
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (file) summarize(join(dir, file), per, unit);
  else console.log("(no CPU profile written)");
  await admin.query("TRUNCATE rollouts, attempts, spans, span_sequences, workers");
}

await profiled(
  `rollout scenario, ${ROLLOUTS} rollouts, ${CONCURRENCY} clients`,
  ROLLOUTS,
  "rollout",
  (base) => runPool(ROLLOUTS, CONCURRENCY, (task) => pythonRollout(base, task)).then(() => {}),
);
await profiled(
  `single-span OTLP, ${OTLP_ROLLOUTS} rollouts × ${OTLP_SPANS} requests, one runner`,
  OTLP_ROLLOUTS * OTLP_SPANS,
  "OTLP request",
  async (base) => {
    for (let i = 0; i < OTLP_ROLLOUTS; i++) await otlpRollout(base, i, OTLP_SPANS);
  },
);
console.log(
  `\nload average at end ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ")}`,
);
await admin.end();
cluster.stop();
