/**
 * Where the store server's CPU goes on Agent Lightning's `rollout` scenario, memory and SQLite in one
 * run: the server (a build, as store-rollout.ts runs it) under `--cpu-prof`, every sample charged to
 * one layer of the HTTP path, bottom-up. A sample's leaf frame decides, mapped through the build's
 * source maps to the source file it came from: node:http / net / stream (parsing, sockets, writes),
 * the hono node adapter (@hono/node-server: Request/Response objects, header copies), hono routing
 * (trie router), hono's context and compose, each of our middlewares (src/server/*.ts by file), zod,
 * JSON parse/stringify (native frames, by name), the store (src/sqlite, src/shared, core's in-memory
 * store), better-sqlite3, the garbage collector. Module loading at startup is left out.
 *
 *   pnpm --filter "@agl/store..." build && pnpm exec tsx bench/store-sqlite-profile.ts
 *     (env: PROFILE_ROOT=<built checkout, default this one>, PROFILE_STORE_ENTRY=<another build's
 *      packages/store/dist/index.js, served instead>, PROFILE_ROLLOUTS=1024,
 *      PROFILE_CONCURRENCY=32, PROFILE_BACKENDS=memory,sqlite, PROFILE_TOP=25)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { SourceMap } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { pythonRollout, runPool } from "./support/rollout-scenario.js";
import { startServerProcess } from "./support/server-process.js";

const ROOT = process.env.PROFILE_ROOT ?? fileURLToPath(new URL("..", import.meta.url));
const STORE_ENTRY = process.env.PROFILE_STORE_ENTRY;
const ROLLOUTS = Number(process.env.PROFILE_ROLLOUTS ?? 1024);
const CONCURRENCY = Number(process.env.PROFILE_CONCURRENCY ?? 32);
const BACKENDS = (process.env.PROFILE_BACKENDS ?? "memory,sqlite").split(",");
const TOP = Number(process.env.PROFILE_TOP ?? 25);

interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface CpuProfile {
  nodes: Array<{ id: number; callFrame: Frame; children?: number[] }>;
  samples: number[];
  timeDeltas: number[];
}

const maps = new Map<string, SourceMap | null>();
/** The source file a frame of a built script came from (its source map), else the script's path. */
function sourceOf(frame: Frame): string {
  const path = frame.url.startsWith("file://") ? fileURLToPath(frame.url) : frame.url;
  if (!path.endsWith(".js")) return path;
  let map = maps.get(path);
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, "utf8")));
    } catch {
      map = null;
    }
    maps.set(path, map);
  }
  if (!map) return path;
  const entry = map.findEntry(frame.lineNumber, frame.columnNumber) as { originalSource?: string };
  return entry.originalSource ? resolve(dirname(path), entry.originalSource) : path;
}

/** The layer of the HTTP path a frame belongs to. */
function layerOf(frame: Frame): string | undefined {
  const { functionName: fn, url } = frame;
  if (url === "") {
    if (fn === "(garbage collector)") return "GC";
    if (fn === "(program)" || fn === "(root)") return "(program: V8/libuv outside JS)";
    if (fn === "parse" || fn === "stringify") return `JSON.${fn}`;
    if (fn === "writev" || fn === "writeUtf8String" || fn === "writeBuffer") return "node:http socket writes";
    return undefined; // other natives: charged to their JS caller
  }
  if (url.startsWith("node:internal/modules") || url.includes("esm/") || fn === "compileForInternalLoader")
    return "startup";
  if (url.startsWith("node:")) {
    const mod = url.slice(5);
    if (/^_http_(server|incoming|common)/.test(mod)) return "node:http parsing/server";
    if (/^_http_outgoing/.test(mod)) return "node:http response writing";
    if (/^(net|stream|internal\/stream|internal\/streams|internal\/net)/.test(mod)) return "node:net/stream";
    if (/timers/.test(mod)) return "node:timers";
    if (/task_queues|promises|process/.test(mod)) return "microtasks/promises";
    if (/events/.test(mod)) return "node:events";
    return `node:${mod.split("/")[0]}`;
  }
  const src = sourceOf(frame);
  if (src.includes("/@hono/node-server/")) return "hono node adapter";
  if (src.includes("/hono/dist/")) {
    if (src.includes("/router/")) return "hono routing";
    if (src.includes("/middleware/bearer-auth")) return "middleware: bearer auth (hono)";
    return `hono ${src.split("/hono/dist/")[1]!.replace(/^cjs\/|\.js$/g, "")}`;
  }
  if (src.includes("/zod/")) return "zod";
  if (src.includes("/better-sqlite3/")) return "better-sqlite3 (JS)";
  const m = /packages\/(\w[\w-]*)\/src\/(.*)\.ts$/.exec(src);
  if (m) {
    const [, pkg, file] = m;
    if (pkg === "store" && file!.startsWith("server/")) return `server/${file!.slice(7)}`;
    if (pkg === "store") return `store: ${file!.split("/")[0]}`;
    if (pkg === "core" && /memory|in-memory/.test(file!)) return "store: core in-memory";
    return `@agl/${pkg}: ${file}`;
  }
  return src.split("/node_modules/").pop()!.split("/")[0];
}

/** Self time (µs) per layer: each sample goes to its leaf's layer, or its nearest JS caller's. */
function layers(file: string): {
  byLayer: Map<string, number>;
  busy: number;
  byFunction: Map<string, number>;
} {
  const profile = JSON.parse(readFileSync(file, "utf8")) as CpuProfile;
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const cache = new Map<number, string>();
  const layerOfNode = (id: number): string => {
    const cached = cache.get(id);
    if (cached) return cached;
    let layer = "(unattributed native)";
    // Startup anywhere up the stack wins: module evaluation is not request work.
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      if (layerOf(byId.get(cur)!.callFrame) === "startup") {
        cache.set(id, "startup");
        return "startup";
      }
    }
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const l = layerOf(byId.get(cur)!.callFrame);
      if (l) {
        layer = l;
        break;
      }
    }
    cache.set(id, layer);
    return layer;
  };
  const byLayer = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let busy = 0;
  for (const [i, id] of profile.samples.entries()) {
    if (byId.get(id)!.callFrame.functionName === "(idle)") continue;
    const layer = layerOfNode(id);
    if (layer === "startup") continue;
    const dt = profile.timeDeltas[i] ?? 0;
    busy += dt;
    byLayer.set(layer, (byLayer.get(layer) ?? 0) + dt);
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    const fn = `${layer} | ${functionName || "(anonymous)"} ${url.split("/").pop()}:${lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + dt);
  }
  return { byLayer, busy, byFunction };
}

const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ");
console.log(
  `# store server profile: rollout scenario, ${ROLLOUTS} rollouts x ${CONCURRENCY} clients, build ${STORE_ENTRY ?? ROOT}\n# load average at start ${load()}`,
);
const tmp = mkdtempSync(join(tmpdir(), "agl-sqlite-prof-"));
const results = new Map<
  string,
  { byLayer: Map<string, number>; busy: number; byFunction: Map<string, number>; cpuMs: number }
>();
for (const backend of BACKENDS) {
  const dir = join(tmp, backend);
  const uri = backend === "sqlite" ? `sqlite:${join(tmp, "rollout.db")}` : "memory:";
  const server = await startServerProcess(ROOT, ["store", uri], STORE_ENTRY, [
    "--cpu-prof",
    `--cpu-prof-dir=${dir}`,
    "--cpu-prof-interval=250",
  ]);
  const base = new URL(server.url);
  const cpu0 = (await server.usage()).cpu_ms;
  await runPool(ROLLOUTS, CONCURRENCY, (task) => pythonRollout(base, task));
  const cpuMs = (await server.usage()).cpu_ms - cpu0;
  await server.stop();
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (!file) throw new Error(`${backend}: no CPU profile written`);
  results.set(backend, { ...layers(join(dir, file)), cpuMs });
}
rmSync(tmp, { recursive: true, force: true });

const all = new Map<string, number>();
for (const r of results.values()) for (const [k, v] of r.byLayer) all.set(k, (all.get(k) ?? 0) + v / r.busy);
const order = [...all].sort((a, b) => b[1] - a[1]).map(([k]) => k);
const cols = [...results.keys()];
console.log(
  `\nserver CPU per rollout (process.cpuUsage, profiler on): ${cols.map((b) => `${b} ${(results.get(b)!.cpuMs / ROLLOUTS).toFixed(2)} ms`).join(", ")}`,
);
console.log(
  `\n| layer (self time, bottom-up) | ${cols.map((b) => `${b} µs/rollout | ${b} share`).join(" | ")} |`,
);
console.log(`|---|${cols.map(() => "---:|---:").join("|")}|`);
for (const k of order.slice(0, TOP)) {
  const cells = cols.map((b) => {
    const r = results.get(b)!;
    const v = r.byLayer.get(k) ?? 0;
    return `${(v / ROLLOUTS).toFixed(0)} | ${((100 * v) / r.busy).toFixed(1)}%`;
  });
  console.log(`| ${k} | ${cells.join(" | ")} |`);
}
console.log(
  `| busy (all non-idle samples) | ${cols.map((b) => `${(results.get(b)!.busy / ROLLOUTS).toFixed(0)} | 100%`).join(" | ")} |`,
);
for (const [backend, r] of results) {
  console.log(
    `\n${backend}: the ${TOP} functions with the most self time\n\n| layer | function | µs/rollout |\n|---|---|---:|`,
  );
  for (const [f, v] of [...r.byFunction].sort((a, b) => b[1] - a[1]).slice(0, TOP))
    console.log(`| ${f} | ${(v / ROLLOUTS).toFixed(0)} |`);
}
console.log(`\n# load average at end ${load()}`);
