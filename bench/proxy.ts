/**
 * Proxy overhead: the same vLLM-like upstream (the core mock, in its own process) called directly and
 * through @agl/proxy (its own process, capture on into an InMemoryLightningStore, default options), in one run.
 *  - added latency: one connection, sequential calls, p50/p99 of proxied minus direct (hrtime)
 *  - throughput: autocannon at fixed concurrency, req/s proxied / direct, rounds interleaved
 *  - reference: a 20-line node:http pass-through proxy with no features, in the proxy's process, to show
 *    the floor any Node HTTP proxy hits on this machine
 * Scenarios: "instant" (upstream answers at once: CPU-bound worst case where load generator, proxy and
 * upstream share 2 cores) and "model-like" (the upstream takes 20 or 50 ms per call, as a small model does).
 *
 * Run: pnpm exec tsx bench/proxy.ts   → bench/results/proxy.{json,md}
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cannon, pct, post } from "./support/http-load.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const SECONDS = 4;
const ROUNDS = 2;

const MESSAGES = [
  { role: "system", content: "You are a careful assistant that answers arithmetic questions." },
  { role: "user", content: "What is 17 * 23? Think step by step, then answer with the number only." },
];
const REPLY = "17 * 23 = 391. The answer is 391.";

function spawnRole(name: string, env: Record<string, string>): Promise<{ child: ChildProcess; msg: any }> {
  const profile = process.env.PROFILE === name ? ["--cpu-prof", "--cpu-prof-dir=/tmp/proxy-prof"] : [];
  const child = spawn(process.execPath, [...profile, "--input-type=module", "-e", CHILD_CODE[name]!], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, ...env },
  });
  return new Promise((resolve, reject) => {
    child.once("message", (msg) => resolve({ child, msg }));
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}

function ask(child: ChildProcess, m: string): Promise<any> {
  return new Promise((resolve) => {
    child.once("message", resolve);
    child.send(m);
  });
}

/**
 * Sequential calls on one connection, rotating direct → proxied → bare call by call, so call i of each
 * side sees the same machine state. Added latency is computed per pair (proxied_i − direct_i, calls made
 * back to back) and its percentiles reported; subtracting two sides' own percentiles would mix different
 * calls (the old p99 column could go negative). Each side's own p50/p99 is reported too.
 */
async function sequential(
  direct: string,
  directBody: string,
  proxied: string[],
  body: string,
  bare: string,
  n: number,
) {
  const d: number[] = [];
  const p: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < Math.min(200, n / 4); i++) {
    await post(direct, directBody);
    await post(proxied[i % proxied.length]!, body);
    await post(bare, directBody);
  }
  for (let i = 0; i < n; i++) {
    d.push(await post(direct, directBody));
    p.push(await post(proxied[i % proxied.length]!, body));
    b.push(await post(bare, directBody));
  }
  const sorted = (xs: number[]) => [...xs].sort((x, y) => x - y);
  const own = (xs: number[]) => {
    const s = sorted(xs);
    return { p50: pct(s, 50), p99: pct(s, 99) };
  };
  const added = (xs: number[]) => own(xs.map((x, i) => x - d[i]!));
  return { direct: own(d), proxied: own(p), bare: own(b), added: added(p), bareAdded: added(b) };
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function scenario(name: string, delayMs: number, connections: number, seqCalls: number) {
  const up = await spawnRole("upstream", { BENCH_DELAY_MS: String(delayMs) });
  const px = await spawnRole("proxy", { BENCH_UPSTREAM: `${up.msg.url}/v1` });
  try {
    const direct = `${up.msg.url}/v1/chat/completions`;
    const bare = `${px.msg.bareUrl}/v1/chat/completions`;
    const proxied = (px.msg.ids as Array<[string, string]>).map(
      ([rid, aid]) => `${px.msg.url}/rollout/${rid}/attempt/${aid}/v1/chat/completions`,
    );
    // direct calls carry what the proxy injects, so the upstream does the same work either way
    const directBody = JSON.stringify({
      model: "policy",
      messages: MESSAGES,
      max_tokens: 64,
      return_token_ids: true,
      logprobs: true,
    });
    const clientBody = JSON.stringify({ model: "anything", messages: MESSAGES, max_tokens: 64 });
    const seq = await sequential(direct, directBody, proxied, clientBody, bare, seqCalls);
    const runs: Record<"direct" | "proxied" | "bare", Awaited<ReturnType<typeof cannon>>[]> = {
      direct: [],
      proxied: [],
      bare: [],
    };
    let proxyCpuUs = 0;
    let proxyCalls = 0;
    let bareCpuUs = 0;
    let bareCalls = 0;
    for (let round = 0; round < ROUNDS; round++) {
      runs.direct.push(await cannon([direct], directBody, connections, SECONDS));
      const cpu0 = await ask(px.child, "cpu");
      const r = await cannon(proxied.slice(round * 16, round * 16 + 16), clientBody, connections, SECONDS);
      const cpu1 = await ask(px.child, "cpu");
      proxyCpuUs += cpu1 - cpu0;
      proxyCalls += r.total;
      runs.proxied.push(r);
      const bareCpu0 = await ask(px.child, "cpu");
      const rb = await cannon([bare], directBody, connections, SECONDS);
      bareCpuUs += (await ask(px.child, "cpu")) - bareCpu0;
      bareCalls += rb.total;
      runs.bare.push(rb);
    }
    const counted = await ask(px.child, "count");
    const summary = (rs: Awaited<ReturnType<typeof cannon>>[]) => ({
      reqPerSec: mean(rs.map((r) => r.reqPerSec)),
      p50: mean(rs.map((r) => r.p50)),
      p99: mean(rs.map((r) => r.p99)),
      errors: rs.reduce((a, r) => a + r.errors, 0),
    });
    const d = summary(runs.direct);
    const p = summary(runs.proxied);
    const b = summary(runs.bare);
    return {
      name,
      upstreamDelayMs: delayMs,
      connections,
      sequential: seq,
      throughput: {
        direct: d,
        proxied: p,
        barePassthrough: b,
        ratio: p.reqPerSec / d.reqPerSec,
        bareRatio: b.reqPerSec / d.reqPerSec,
      },
      proxyCpuMicrosPerCall: proxyCpuUs / proxyCalls,
      bareCpuMicrosPerCall: bareCpuUs / bareCalls,
      capture: { ...counted, proxiedCalls: proxyCalls + seqCalls + Math.min(200, seqCalls / 4) },
    };
  } finally {
    px.child.kill();
    up.child.kill();
  }
}

async function main() {
  ensureBuilt("core", "mock-llm/index.js");
  ensureBuilt("proxy", "index.js");
  const started = Date.now();
  const scenarios = [];
  scenarios.push(await scenario("instant upstream (CPU-bound)", 0, 32, 2000));
  // PROFILE=proxy QUICK=1: one scenario with a CPU profile of the proxy process in /tmp/proxy-prof
  if (process.env.QUICK) return console.log(JSON.stringify(scenarios[0], null, 1));
  scenarios.push(await scenario("model-like upstream, 20 ms per call", 20, 64, 400));
  scenarios.push(await scenario("model-like upstream, 50 ms per call", 50, 64, 200));
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    loadAverageAtEnd: (await import("node:os")).loadavg(),
    scenarios,
    seconds: (Date.now() - started) / 1000,
  };
  writeFileSync(join(here, "results/proxy.json"), `${JSON.stringify(results, null, 2)}\n`);
  const f = (x: number, digits = 3) => x.toFixed(digits);
  const lines = [
    "# Proxy benchmark",
    "",
    `${results.date}, Node ${results.node}, ${results.cpus} CPUs shared by the load generator, the proxy and the upstream ` +
      `(and other users: load average ${results.loadAverageAtEnd.map((x) => x.toFixed(1)).join(" / ")} at the end). ` +
      "Command: `pnpm exec tsx bench/proxy.ts`.",
    "Capture on: every proxied call is recorded as a span in an InMemoryLightningStore (token ids, logprobs, messages, " +
      "gen_ai attributes; raw bodies off, the default).",
    "",
    "| scenario | direct p50 / p99 ms | proxied p50 / p99 ms | **added p50** / p99 ms (paired) | bare pass-through added p50 / p99 ms (paired) | direct req/s | proxied req/s | **ratio** | bare pass-through ratio | proxy CPU µs/call (bare) | spans / proxied calls |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...scenarios.map(
      (s) =>
        `| ${s.name} | ${f(s.sequential.direct.p50)} / ${f(s.sequential.direct.p99)} | ${f(s.sequential.proxied.p50)} / ${f(s.sequential.proxied.p99)} | **${f(s.sequential.added.p50)}** / ${f(s.sequential.added.p99)} | ${f(s.sequential.bareAdded.p50)} / ${f(s.sequential.bareAdded.p99)} | ${f(s.throughput.direct.reqPerSec, 0)} | ${f(s.throughput.proxied.reqPerSec, 0)} | **${f(s.throughput.ratio * 100, 1)} %** | ${f(s.throughput.bareRatio * 100, 1)} % | ${f(s.proxyCpuMicrosPerCall, 0)} (${f(s.bareCpuMicrosPerCall, 0)}) | ${s.capture.spans} / ${s.capture.proxiedCalls} (${s.capture.withIds} with token ids) |`,
    ),
    "",
    "Latency columns: one keep-alive connection per side, sequential calls timed with hrtime, rotating direct → proxied → " +
      "bare call by call. Direct and proxied p50/p99 are each side's own percentiles; added p50/p99 are percentiles of the " +
      "per-pair difference (proxied call i − direct call i, made back to back), so they describe one call's overhead. " +
      `Throughput: autocannon, ${ROUNDS} × ${SECONDS} s per side, ` +
      'direct / proxied / bare rounds interleaved, means reported. "Bare pass-through" is a 20-line node:http proxy with no ' +
      "features (no parsing, routing, retries or capture) in the proxy's process: the floor for any Node proxy here.",
    "Targets (issue 5): < 1 ms p50 added latency, > 70 % of direct throughput. Spans can exceed the calls counted when " +
      "autocannon aborts calls at the end of a run (those are recorded as partial).",
    "",
  ];
  writeFileSync(join(here, "results/proxy.md"), lines.join("\n"));
  console.log(lines.join("\n"));
  process.exit(0);
}

// ---------------------------------------------------------------- child roles
// The children run the BUILT packages under plain node (as `agl-proxy` would), not under tsx: tsx's
// loader thread adds ~1 ms of wake-up latency around setImmediate that users never pay.
const REPLY_JS = JSON.stringify(REPLY);
const dist = (p: string) => pathToFileURL(join(root, "packages", p)).href;
const CHILD_CODE: Record<string, string> = {
  upstream: `
    const { startMockLLMServer } = await import(${JSON.stringify(dist("core/dist/mock-llm/index.js"))});
    const delayMs = Number(process.env.BENCH_DELAY_MS);
    const server = await startMockLLMServer({ respond: () => ({ content: ${REPLY_JS} }), ...(delayMs ? { delayMs } : {}) });
    // the mock keeps every request for tests; a benchmark must not grow memory with it
    setInterval(() => server.requests.splice(0), 200).unref();
    process.on("SIGTERM", () => process.exit(0));
    process.send({ url: server.url });
  `,
  proxy: `
    const { InMemoryLightningStore } = await import(${JSON.stringify(dist("core/dist/index.js"))});
    const { LLMProxy } = await import(${JSON.stringify(dist("proxy/dist/index.js"))});
    const http = await import("node:http");
    const store = new InMemoryLightningStore({ watchdog: false });
    const ids = [];
    for (let i = 0; i < 64; i++) {
      const r = await store.startRollout({ input: { i } });
      ids.push([r.rollout_id, r.attempt.attempt_id]);
    }
    const upstream = new URL(process.env.BENCH_UPSTREAM);
    const proxy = new LLMProxy({ store, backends: [{ url: upstream.href }], model: "policy", healthCheckIntervalMs: 0,
      logger: { warn: () => {}, error: (m) => console.error(m) } });
    const url = await proxy.start();
    // the reference: a pass-through proxy with no features, same process
    const bareAgent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
    const bare = http.createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const out = http.request({ hostname: upstream.hostname, port: upstream.port, path: "/v1/chat/completions",
          method: "POST", agent: bareAgent, headers: { "content-type": "application/json", "content-length": body.length } },
          (up) => {
            const parts = [];
            up.on("data", (c) => parts.push(c));
            up.on("end", () => {
              const b = Buffer.concat(parts);
              res.writeHead(up.statusCode ?? 502, { "content-type": "application/json", "content-length": b.length });
              res.end(b);
            });
          });
        out.end(body);
      });
    });
    await new Promise((r) => bare.listen(0, "127.0.0.1", r));
    process.on("SIGTERM", () => process.exit(0));
    process.on("message", async (m) => {
      if (m === "cpu") {
        const u = process.cpuUsage();
        process.send(u.user + u.system);
      } else if (m === "count") {
        await proxy.flush();
        let spans = 0;
        let withIds = 0;
        for (const [rid] of ids) {
          const items = (await store.querySpans(rid)).items;
          spans += items.length;
          withIds += items.filter((s) => Array.isArray(s.attributes.response_token_ids)).length;
        }
        process.send({ spans, withIds });
      }
    });
    process.send({ url, ids, bareUrl: "http://127.0.0.1:" + bare.address().port });
  `,
};

/** Build a package when its dist is missing or older than its sources (CI runs `pnpm build` first). */
function ensureBuilt(pkg: string, entry: string) {
  const dir = join(root, "packages", pkg);
  const newest = (d: string): number =>
    Math.max(
      ...readdirSync(d, { withFileTypes: true }).map((e): number =>
        e.isDirectory() ? newest(join(d, e.name)) : statSync(join(d, e.name)).mtimeMs,
      ),
    );
  const out = join(dir, "dist", entry);
  if (existsSync(out) && statSync(out).mtimeMs >= newest(join(dir, "src"))) return;
  console.log(`building @agl/${pkg} for the benchmark...`);
  execFileSync("pnpm", ["run", "build"], { cwd: dir, stdio: "inherit" });
}

await main();
