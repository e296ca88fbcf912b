/**
 * Overhead of the proxy's client APIs and of relay mode, in one run on the same vLLM-like upstream (the
 * core mock in its own process), capture on (InMemoryLightningStore):
 *  - `/v1/responses` and `/v1/messages` through the proxy (served over the upstream's chat/completions, so
 *    the engine does the same work as for a direct chat call) vs the same call made directly as chat;
 *  - relay mode: the same chat call through a relay-mode proxy whose only backend is an `agl-relay-worker`
 *    (own process, WebSocket hop) vs through the proxy with the engine as an HTTP backend.
 * Latency: one connection per side, calls rotating side by side, added latency = percentiles of the paired
 * difference (call i of a side − call i of its baseline). Throughput: autocannon, rounds interleaved.
 *
 * Run: pnpm exec tsx bench/proxy-apis.ts   → bench/results/proxy-apis.{json,md} (about a minute)
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { cannon, pct, post } from "./support/http-load.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const SECONDS = 3;
const ROUNDS = 2;
const SEQUENTIAL = Number(process.env.BENCH_CALLS ?? 600);
const WORKER_TOKEN = "bench-worker-token-0123456789";

const SYSTEM = "You are a careful assistant that answers arithmetic questions.";
const QUESTION = "What is 17 * 23? Think step by step, then answer with the number only.";
const REPLY = "17 * 23 = 391. The answer is 391.";
const MESSAGES = [
  { role: "system", content: SYSTEM },
  { role: "user", content: QUESTION },
];
const bodies = {
  // direct chat carries what the proxy injects, so the engine does the same work either way
  direct: JSON.stringify({
    model: "policy",
    messages: MESSAGES,
    max_tokens: 64,
    return_token_ids: true,
    logprobs: true,
  }),
  chat: JSON.stringify({ model: "m", messages: MESSAGES, max_tokens: 64 }),
  responses: JSON.stringify({ model: "m", instructions: SYSTEM, input: QUESTION, max_output_tokens: 64 }),
  messages: JSON.stringify({
    model: "m",
    system: SYSTEM,
    messages: [{ role: "user", content: QUESTION }],
    max_tokens: 64,
  }),
};

const dist = (p: string) => JSON.stringify(pathToFileURL(join(root, "packages", p)).href);
const ROLES: Record<string, string> = {
  upstream: `
    const { startMockLLMServer } = await import(${dist("core/dist/mock-llm/index.js")});
    const delayMs = Number(process.env.BENCH_DELAY_MS);
    const server = await startMockLLMServer({ respond: () => ({ content: ${JSON.stringify(REPLY)} }), ...(delayMs ? { delayMs } : {}) });
    setInterval(() => server.requests.splice(0), 200).unref();
    process.send({ url: server.url });
  `,
  proxy: `
    const { InMemoryLightningStore } = await import(${dist("core/dist/index.js")});
    const { LLMProxy } = await import(${dist("proxy/dist/index.js")});
    const relay = process.env.BENCH_RELAY === "1";
    const store = new InMemoryLightningStore({ watchdog: false });
    const ids = [];
    for (let i = 0; i < 32; i++) {
      const r = await store.startRollout({ input: { i } });
      ids.push([r.rollout_id, r.attempt.attempt_id]);
    }
    const proxy = new LLMProxy({ store, model: "policy", healthCheckIntervalMs: 0,
      ...(relay ? { relay: { workerToken: ${JSON.stringify(WORKER_TOKEN)} } } : { backends: [{ url: process.env.BENCH_UPSTREAM }] }),
      logger: { warn: () => {}, error: (m) => console.error(m) } });
    const url = await proxy.start();
    process.on("message", async (m) => {
      if (m === "cpu") { const u = process.cpuUsage(); process.send(u.user + u.system); }
      if (m === "workers") process.send(proxy.relayWorkers.length);
      if (m === "count") {
        await proxy.flush();
        let spans = 0, withIds = 0;
        for (const [rid] of ids) {
          const items = (await store.querySpans(rid)).items;
          spans += items.length;
          withIds += items.filter((s) => Array.isArray(s.attributes.response_token_ids) && Array.isArray(s.attributes.prompt_token_ids)).length;
        }
        process.send({ spans, withIds });
      }
    });
    process.send({ url, ids });
  `,
  worker: `
    const { startRelayWorker } = await import(${dist("proxy/dist/index.js")});
    const w = startRelayWorker({ proxy: process.env.BENCH_PROXY, upstream: process.env.BENCH_UPSTREAM,
      token: ${JSON.stringify(WORKER_TOKEN)}, models: ["policy"], workerId: "bench", logger: { warn() {}, error: (m) => console.error(m) } });
    await w.ready;
    process.send({ ok: true });
  `,
};

const children: ChildProcess[] = [];
function spawnRole(
  name: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; msg: any }> {
  const child = spawn(process.execPath, ["--input-type=module", "-e", ROLES[name]!], {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, ...env },
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once("message", (msg) => resolve({ child, msg }));
    child.once("exit", (code) => reject(new Error(`${name} exited with ${code}`)));
  });
}
const ask = (child: ChildProcess, m: string) =>
  new Promise<any>((resolve) => {
    child.once("message", resolve);
    child.send(m);
  });

interface Side {
  name: string;
  urls: string[];
  body: string;
  /** The side its paired added latency is measured against. */
  baseline: string | null;
}

/** Sequential calls on one connection per side, rotating side by side; paired differences to each baseline. */
async function sequential(sides: Side[], n: number) {
  const times = new Map<string, number[]>(sides.map((s) => [s.name, []]));
  for (let i = 0; i < n + 100; i++) {
    for (const s of sides) {
      const t = await post(s.urls[i % s.urls.length]!, s.body);
      if (i >= 100) times.get(s.name)!.push(t);
    }
  }
  const own = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return { p50: pct(sorted, 50), p99: pct(sorted, 99) };
  };
  return Object.fromEntries(
    sides.map((s) => {
      const xs = times.get(s.name)!;
      const base = s.baseline ? times.get(s.baseline)! : null;
      return [s.name, { own: own(xs), added: base ? own(xs.map((x, i) => x - base[i]!)) : null }];
    }),
  );
}

async function scenario(name: string, delayMs: number, connections: number) {
  const up = await spawnRole("upstream", { BENCH_DELAY_MS: String(delayMs) });
  const upstream = `${up.msg.url}/v1`;
  const px = await spawnRole("proxy", { BENCH_UPSTREAM: upstream });
  const rp = await spawnRole("proxy", { BENCH_RELAY: "1" });
  await spawnRole("worker", { BENCH_PROXY: rp.msg.url.replace("http", "ws"), BENCH_UPSTREAM: upstream });
  if ((await ask(rp.child, "workers")) !== 1) throw new Error("the relay worker did not connect");
  const at = (proxy: any, op: string) =>
    (proxy.msg.ids as Array<[string, string]>).map(
      ([r, a]) => `${proxy.msg.url}/rollout/${r}/attempt/${a}/v1/${op}`,
    );
  const sides: Side[] = [
    { name: "direct chat", urls: [`${upstream}/chat/completions`], body: bodies.direct, baseline: null },
    { name: "proxied chat", urls: at(px, "chat/completions"), body: bodies.chat, baseline: "direct chat" },
    {
      name: "proxied /v1/responses",
      urls: at(px, "responses"),
      body: bodies.responses,
      baseline: "direct chat",
    },
    {
      name: "proxied /v1/messages",
      urls: at(px, "messages"),
      body: bodies.messages,
      baseline: "direct chat",
    },
    { name: "relay chat", urls: at(rp, "chat/completions"), body: bodies.chat, baseline: "proxied chat" },
  ];
  const seq = await sequential(sides, delayMs ? Math.min(SEQUENTIAL, 200) : SEQUENTIAL);
  const rps = new Map<string, number[]>(sides.map((s) => [s.name, []]));
  const errors = new Map<string, number>(sides.map((s) => [s.name, 0]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const s of sides) {
      const r = await cannon(s.urls.slice(0, 16), s.body, connections, SECONDS);
      rps.get(s.name)!.push(r.reqPerSec);
      errors.set(s.name, errors.get(s.name)! + r.errors);
    }
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const capture = { proxy: await ask(px.child, "count"), relay: await ask(rp.child, "count") };
  for (const c of children.splice(0)) c.kill();
  return {
    name,
    upstreamDelayMs: delayMs,
    connections,
    sides: sides.map((s) => ({
      name: s.name,
      baseline: s.baseline,
      ...seq[s.name],
      reqPerSec: mean(rps.get(s.name)!),
      errors: errors.get(s.name)!,
    })),
    capture,
  };
}

async function main() {
  const started = Date.now();
  const loadBefore = loadavg();
  const scenarios = [await scenario("instant upstream (CPU-bound)", 0, 32)];
  scenarios.push(await scenario("model-like upstream, 20 ms per call", 20, 64));
  const results = {
    date: new Date().toISOString(),
    node: process.version,
    cpus: cpus().length,
    loadAverageBefore: loadBefore,
    loadAverageAtEnd: loadavg(),
    scenarios,
    seconds: (Date.now() - started) / 1000,
  };
  writeFileSync(join(here, "results/proxy-apis.json"), `${JSON.stringify(results, null, 2)}\n`);
  const f = (x: number, d = 2) => x.toFixed(d);
  const load = (l: number[]) => l.map((x) => x.toFixed(1)).join(" / ");
  const lines = [
    "# Proxy client APIs and relay mode",
    "",
    `${results.date}, Node ${results.node}, ${results.cpus} CPUs shared by the load generator, the proxies, the relay worker ` +
      `and the upstream, and by other users: load average ${load(loadBefore)} before, ${load(results.loadAverageAtEnd)} at the end. ` +
      "Command: `pnpm exec tsx bench/proxy-apis.ts`. Capture on (InMemoryLightningStore).",
    "",
    ...scenarios.flatMap((s) => {
      const direct = s.sides[0]!;
      return [
        `## ${s.name} (${s.connections} connections for throughput)`,
        "",
        "| side | own p50 / p99 ms | **added p50** / p99 ms (paired, vs) | req/s | vs direct chat req/s |",
        "|---|---|---|---|---|",
        ...s.sides.map(
          (x: any) =>
            `| ${x.name} | ${f(x.own.p50)} / ${f(x.own.p99)} | ${x.added ? `**${f(x.added.p50)}** / ${f(x.added.p99)} (vs ${x.baseline})` : "—"} | ${f(x.reqPerSec, 0)} | ${f((x.reqPerSec / direct.reqPerSec) * 100, 1)} %${x.errors ? ` (${x.errors} errors)` : ""} |`,
        ),
        "",
        `Spans: ${s.capture.proxy.spans} on the HTTP-backend proxy (${s.capture.proxy.withIds} with prompt and response ids), ` +
          `${s.capture.relay.spans} on the relay proxy (${s.capture.relay.withIds} with ids).`,
        "",
      ];
    }),
    "`/v1/responses` and `/v1/messages` are served over the engine's chat/completions, so their baseline is the same " +
      "call made directly as chat (the engine does identical work); the difference is the proxy plus the translation of " +
      "request and answer. Relay rows compare the relay-mode proxy (engine behind an `agl-relay-worker` over a WebSocket) " +
      "with the proxy calling the engine over HTTP: the difference is the WebSocket hop and the worker process.",
    "",
  ];
  writeFileSync(join(here, "results/proxy-apis.md"), lines.join("\n"));
  console.log(lines.join("\n"));
  process.exit(0);
}

process.on("exit", () => {
  for (const c of children) c.kill();
});
await main();
