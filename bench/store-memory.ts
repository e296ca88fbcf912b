/**
 * Memory of the agl-store server under large hostile bodies, and whether what it holds afterwards is
 * live (a leak) or retained (pages kept by the heap or malloc that no object uses). Issue 27 saw a
 * PostgreSQL store server hold 2.2 GB after a fuzz run with 30 MB bodies of nested arrays.
 *
 * Per build and backend, a fresh `agl-store` (the checkout's built CLI, run with --expose-gc and
 * bench/support/memory-probe.cjs) gets bursts of 4 parallel 30 MB bodies under the 32 MiB limit:
 *   deep: `[[[[…]]]]` (refused for its depth), wide: `{"rollouts":[{"input":0},…]}` (2.5M items,
 *   refused for the batch limit: a body that must be parsed to be judged).
 * Measured from /proc every 50 ms: idle RSS, peak RSS, RSS after 10 s idle; then the probe's full GC:
 * heap used and RSS after it. With BENCH_BASELINE_ROOT=<checkout, built> the same runs are made
 * against that build first, so before/after come from one run.
 *
 *   pnpm exec tsx bench/store-memory.ts   (env: BENCH_BURSTS=3, BENCH_ONLY=postgres,sqlite,
 *     BENCH_BODIES=deep[,wide], BENCH_BASELINE_ROOT, BENCH_MEMORY_MB=30)
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startPostgresCluster } from "../test/support/postgres.js";
import { startCliServer } from "./support/server-process.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const BURSTS = Number(process.env.BENCH_BURSTS ?? 3);
const BODY_MB = Number(process.env.BENCH_MEMORY_MB ?? 30);
const BASELINE = process.env.BENCH_BASELINE_ROOT;
const ONLY = (process.env.BENCH_ONLY ?? "postgres,sqlite").split(",").filter(Boolean);
/** Body kinds to send (deep by default: the issue's case; wide takes the old build minutes per burst). */
const KINDS = (process.env.BENCH_BODIES ?? "deep").split(",").filter(Boolean);
const PARALLEL = 4;
const MiB = 2 ** 20;

const tmp = mkdtempSync(join(tmpdir(), "agl-bench-memory-"));
const cluster = ONLY.includes("postgres") ? await startPostgresCluster() : null;

function rssOf(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

let dbCounter = 0;
async function uriFor(backend: string): Promise<string> {
  if (backend === "sqlite") return `sqlite:${join(tmp, `memory-${dbCounter++}.db`)}`;
  const pg = (await import("pg")).default;
  const admin = new pg.Client({ connectionString: cluster!.url });
  await admin.connect();
  const name = `memory_${dbCounter++}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(cluster!.url);
  url.pathname = `/${name}`;
  return url.toString();
}

const bodies: Record<string, () => string> = {
  deep: () => {
    const half = Math.floor((BODY_MB * 1e6) / 2);
    return "[".repeat(half) + "]".repeat(half);
  },
  wide: () => {
    const item = '{"input":0},';
    const n = Math.floor((BODY_MB * 1e6) / item.length);
    return `{"rollouts":[${item.repeat(n - 1)}{"input":0}]}`;
  },
};

interface Row {
  build: string;
  backend: string;
  body: string;
  statuses: string;
  idle_rss_mib: number;
  peak_rss_mib: number;
  rss_after_idle_mib: number;
  heap_used_idle_mib: number;
  heap_used_after_gc_mib: number;
  rss_after_gc_mib: number;
  health_ms_max: number;
}

/** The probe's full GC in the server, and what it saw before and after. */
async function probe(pid: number, file: string): Promise<{ rss: number; heap_used: number }> {
  const lines = () => (existsSync(file) ? readFileSync(file, "utf8").trim().split("\n").filter(Boolean) : []);
  const seen = lines().length;
  process.kill(pid, "SIGUSR2");
  for (let i = 0; i < 400 && lines().length === seen; i++) await new Promise((r) => setTimeout(r, 50));
  const last = lines()[seen];
  if (!last) throw new Error("memory probe did not answer");
  return JSON.parse(last).after;
}

async function run(build: { name: string; root: string }, backend: string, kind: string): Promise<Row> {
  const probeFile = join(tmp, `probe-${build.name}-${backend}-${kind}.jsonl`);
  process.env.AGL_MEMORY_PROBE_FILE = probeFile;
  process.env.BENCH_SERVER_NODE_ARGS = `--expose-gc --require ${join(ROOT, "bench/support/memory-probe.cjs")}`;
  const server = await startCliServer(build.root, await uriFor(backend));
  const pid = server.child.pid!;
  try {
    await fetch(`${server.url}/v1/agl/health`);
    await new Promise((r) => setTimeout(r, 1000));
    const idleHeap = await probe(pid, probeFile);
    const idle = rssOf(pid);
    let peak = idle;
    const sampler = setInterval(() => {
      peak = Math.max(peak, rssOf(pid));
    }, 50);
    const body = bodies[kind]!();
    const statuses = new Map<string, number>();
    let healthMax = 0;
    for (let b = 0; b < BURSTS; b++) {
      // Health probes while the burst is served: how long a liveness check waits.
      let bursting = true;
      const health = (async () => {
        while (bursting && server.child.exitCode === null && server.child.signalCode === null) {
          const t = performance.now();
          await fetch(`${server.url}/v1/agl/health`)
            .then((r) => r.arrayBuffer())
            .catch(() => null);
          healthMax = Math.max(healthMax, performance.now() - t);
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const answers = await Promise.all(
        Array.from({ length: PARALLEL }, () =>
          fetch(`${server.url}/v1/agl/queues/rollouts/enqueue`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          }).then(
            async (r) => {
              await r.arrayBuffer();
              return String(r.status);
            },
            // The old build could die mid-burst (out of heap) or cut the upload: counted, not thrown.
            (error: Error) => `${(error.cause as { code?: string })?.code ?? error.message}`,
          ),
        ),
      );
      bursting = false;
      await health;
      for (const s of answers) statuses.set(s, (statuses.get(s) ?? 0) + 1);
      if (server.child.exitCode !== null || server.child.signalCode !== null) break;
    }
    const died = server.child.exitCode ?? server.child.signalCode;
    if (died !== null) {
      clearInterval(sampler);
      return {
        build: build.name,
        backend,
        body: kind,
        statuses: `${[...statuses].map(([s, n]) => `${n} x ${s}`).join(", ")}; server died (${died})`,
        idle_rss_mib: idle / MiB,
        peak_rss_mib: peak / MiB,
        rss_after_idle_mib: Number.NaN,
        heap_used_idle_mib: idleHeap.heap_used / MiB,
        heap_used_after_gc_mib: Number.NaN,
        rss_after_gc_mib: Number.NaN,
        health_ms_max: healthMax,
      };
    }
    clearInterval(sampler);
    peak = Math.max(peak, rssOf(pid));
    await new Promise((r) => setTimeout(r, 10_000));
    const afterIdle = rssOf(pid);
    const gc = await probe(pid, probeFile);
    return {
      build: build.name,
      backend,
      body: kind,
      statuses: [...statuses].map(([s, n]) => `${n} x ${s}`).join(", "),
      idle_rss_mib: idle / MiB,
      peak_rss_mib: peak / MiB,
      rss_after_idle_mib: afterIdle / MiB,
      heap_used_idle_mib: idleHeap.heap_used / MiB,
      heap_used_after_gc_mib: gc.heap_used / MiB,
      rss_after_gc_mib: gc.rss / MiB,
      health_ms_max: healthMax,
    };
  } finally {
    await server.stop();
  }
}

const builds = [...(BASELINE ? [{ name: "before", root: BASELINE }] : []), { name: "after", root: ROOT }];
for (const b of builds)
  if (!existsSync(join(b.root, "packages/store/dist/cli.js")))
    throw new Error(`build ${b.root} first: pnpm --filter "@agl/store..." build`);

const rows: Row[] = [];
const loadAtStart = loadavg();
try {
  for (const backend of ["postgres", "sqlite"].filter((b) => ONLY.includes(b)))
    for (const kind of KINDS)
      for (const build of builds) {
        const row = await run(build, backend, kind);
        rows.push(row);
        console.log(JSON.stringify(row));
      }
} finally {
  cluster?.stop();
  rmSync(tmp, { recursive: true, force: true });
}

const f = (x: number) => (Number.isNaN(x) ? "-" : x.toFixed(0));
const md = `# Store server memory under large hostile bodies

Per build and backend, a fresh \`agl-store\` gets ${BURSTS} bursts of ${PARALLEL} parallel ${BODY_MB} MB bodies
(deep: nested arrays; wide: an enqueue of ${Math.floor((BODY_MB * 1e6) / 12).toLocaleString("en")} rollouts, over the batch limit), then 10 s idle,
then two full GCs (bench/support/memory-probe.cjs). Heap used after the GC back near idle means nothing leaked:
RSS above it is retained by the allocator, not held by objects.
${BASELINE ? `\`before\` is the build at BENCH_BASELINE_ROOT, \`after\` this checkout, run back to back.` : ""}
Machine: ${cpus().length} cores, Node ${process.version}; load average at start ${loadAtStart.map((x) => x.toFixed(1)).join(" / ")}, at end ${loadavg()
  .map((x) => x.toFixed(1))
  .join(" / ")}.

| build | backend | body | answers | idle RSS MiB | peak RSS MiB | RSS after 10 s idle | heap used idle | heap used after GC | RSS after GC | slowest health check ms |
|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|
${rows
  .map(
    (r) =>
      `| ${r.build} | ${r.backend} | ${r.body} | ${r.statuses} | ${f(r.idle_rss_mib)} | ${f(r.peak_rss_mib)} | ${f(r.rss_after_idle_mib)} | ${f(r.heap_used_idle_mib)} | ${f(r.heap_used_after_gc_mib)} | ${f(r.rss_after_gc_mib)} | ${f(r.health_ms_max)} |`,
  )
  .join("\n")}
`;
const RESULT = process.env.BENCH_RESULT ?? "store-memory";
writeFileSync(join(ROOT, `bench/results/${RESULT}.md`), md);
writeFileSync(join(ROOT, `bench/results/${RESULT}.json`), `${JSON.stringify(rows, null, 2)}\n`);
console.log(md);
