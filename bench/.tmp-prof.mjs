// proxy-only load: upstream child, proxy here (profile this process), autocannon child
import { fork, spawn } from "node:child_process";
import { createRequire } from "node:module";
const { InMemoryLightningStore } = await import("../packages/core/dist/index.js");
const { LLMProxy } = await import("../packages/proxy/dist/index.js");
const up = spawn(process.execPath, ["--input-type=module", "-e", `
  const { startMockLLMServer } = await import("${process.cwd()}/packages/core/dist/mock-llm/index.js");
  const server = await startMockLLMServer({ ...(Number(process.env.DELAY) ? { delayMs: Number(process.env.DELAY) } : {}), respond: () => ({ content: "17 * 23 = 391. The answer is 391." }) });
  setInterval(() => server.requests.splice(0), 200).unref();
  process.send(server.url);`], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
const upUrl = await new Promise((r) => up.once("message", r));
const store = new InMemoryLightningStore({ watchdog: false });
const ids = [];
for (let i = 0; i < 16; i++) { const r = await store.startRollout({ input: { i } }); ids.push([r.rollout_id, r.attempt.attempt_id]); }
const proxy = new LLMProxy({ store, backends: [{ url: upUrl + "/v1" }], model: "policy", healthCheckIntervalMs: 0, logger: { warn() {}, error: console.error } });
const url = await proxy.start();
const autocannon = createRequire(import.meta.url)("autocannon");
const body = JSON.stringify({ model: "anything", messages: [{ role: "system", content: "You are a careful assistant that answers arithmetic questions." }, { role: "user", content: "What is 17 * 23? Think step by step, then answer with the number only." }], max_tokens: 64 });
const c0 = process.cpuUsage();
const ac = spawn(process.execPath, ["--input-type=module", "-e", `
  import { createRequire } from "node:module";
  const autocannon = createRequire("${process.cwd()}/bench/x.js")("autocannon");
  const res = await autocannon(${JSON.stringify({ url, connections: Number(process.env.CONN ?? 32), duration: Number(process.env.DUR ?? 6), requests: ids.map(([r, a]) => ({ method: "POST", path: `/rollout/${r}/attempt/${a}/v1/chat/completions`, headers: { "content-type": "application/json" }, body })) })});
  process.send({ average: res.requests.average, total: res.requests.total });`], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
const res = { requests: await new Promise((r) => ac.once("message", r)) };
const c1 = process.cpuUsage(c0);
console.log("req/s", res.requests.average, "cpu µs/call", ((c1.user + c1.system) / res.requests.total).toFixed(0), "user", (c1.user / res.requests.total).toFixed(0), "sys", (c1.system / res.requests.total).toFixed(0));
await proxy.stop(); up.kill(); process.exit(0);
