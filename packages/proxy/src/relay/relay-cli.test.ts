import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { afterAll, beforeAll, expect, it } from "vitest";
import { WebSocket } from "ws";
import { proxyOptionsFromArgs } from "../cli.js";

const proxyCli = fileURLToPath(new URL("../cli.ts", import.meta.url));
const workerCli = fileURLToPath(new URL("../relay-worker-cli.ts", import.meta.url));
const TOKEN = "cli-worker-token-0123456789";

/** Start a CLI under tsx and resolve with the first match of `ready` in its output. */
function spawnCli(
  file: string,
  args: string[],
  ready: RegExp,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; match: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", file, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`no "${ready}" in: ${out}`)), 60_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, match: m[1] ?? m[0] });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code}: ${out}`));
    });
  });
}

const children: ChildProcess[] = [];
let mock: MockLLMServer;
beforeAll(async () => {
  mock = await startMockLLMServer({ models: ["engine-model"] });
});
afterAll(async () => {
  for (const c of children) if (c.exitCode === null) c.kill("SIGTERM");
  await mock.close();
});

it("agl-relay-worker --version prints the package version; an unknown --log-level names the flag", () => {
  const run = (args: string[]) =>
    spawnSync(process.execPath, ["--import", "tsx", workerCli, ...args], {
      encoding: "utf8",
      timeout: 60_000,
    });
  const version = run(["--version"]);
  expect(version.status).toBe(0);
  expect(version.stdout.trim()).toBe(
    JSON.parse(readFileSync(fileURLToPath(new URL("../../package.json", import.meta.url)), "utf8")).version,
  );
  const bad = run([
    "--proxy",
    "ws://127.0.0.1:9",
    "--upstream",
    "http://127.0.0.1:9/v1",
    "--log-level",
    "loud",
  ]);
  expect(bad.status).not.toBe(0);
  expect(bad.stderr).toMatch(/--log-level.*loud/);
});

it("flags: --relay needs a worker token; backends become optional with it", () => {
  expect(() => proxyOptionsFromArgs({ relay: true, backend: [] }, {})).toThrow(/worker-token/);
  expect(() => proxyOptionsFromArgs({ relay: false }, {})).toThrow(/--backend/);
  expect(
    proxyOptionsFromArgs({ relay: true, waitForWorkerMs: 5 }, { AGL_PROXY_WORKER_TOKEN: TOKEN }),
  ).toMatchObject({
    backends: [],
    relay: { workerToken: TOKEN, waitForWorkerMs: 5 },
  });
});

it("agl-proxy --relay and agl-relay-worker: a call reaches the engine through the dialed-out worker", async () => {
  const proxy = await spawnCli(
    proxyCli,
    ["--relay", "--worker-token", TOKEN, "--port", "0", "--health-interval-ms", "0"],
    /listening on (http:\/\/\S+) /,
  );
  const url = proxy.match;
  const worker = await spawnCli(
    workerCli,
    [
      "--proxy",
      url.replace("http", "ws"),
      "--upstream",
      mock.baseURL,
      "--worker-id",
      "cli-w",
      "--log-format",
      "json",
    ],
    /^(\{.*"msg":"agl-relay-worker cli-w serving.*\})$/m,
    { AGL_RELAY_WORKER_TOKEN: TOKEN },
  );
  // Under --log-format json the start line is a JSON log line too.
  expect(JSON.parse(worker.match)).toMatchObject({ name: "agl-relay-worker", level: 30, worker_id: "cli-w" });
  const health = await (await fetch(`${url}/health`)).json();
  expect(health.backends.map((b: any) => b.url)).toEqual(["relay://cli-w/v1"]);
  const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "x", maxRetries: 0 });
  const r = await client.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "relay" }],
  });
  expect(r.choices[0]!.message.content).toBe("Echo: relay");
  expect(r.model).toBe("engine-model");
  // other upgrade paths and wrong tokens are refused
  const status = (path: string, token: string) =>
    new Promise<number>((resolve) => {
      const ws = new WebSocket(`${url.replace("http", "ws")}${path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      ws.on("unexpected-response", (_q, res) => resolve(res.statusCode ?? 0));
      ws.on("open", () => resolve(101));
      ws.on("error", () => {});
    });
  expect(await status("/ws/other", TOKEN)).toBe(404);
  expect(await status("/ws/worker", "nope")).toBe(401);
}, 120_000); // two CLIs start under tsx: ~28 s at load 20 on 2 cores, so the default 30 s is too close
