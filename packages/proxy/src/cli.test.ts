import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type MockLLMServer, mockEncode, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram, parseBackend, proxyOptionsFromArgs } from "./cli.js";
import { resolveOptions } from "./options.js";

const cli = fileURLToPath(new URL("./cli.ts", import.meta.url));

function startCli(args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", cli, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`agl-proxy did not start: ${out}`)), 20_000);
    const onData = (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+) /.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ child, url: m[1]! });
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`agl-proxy exited with ${code}: ${out}`));
    });
  });
}

const stopCli = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.kill("SIGTERM");
  });

describe("agl-proxy CLI", () => {
  let mock: MockLLMServer;
  beforeAll(async () => {
    mock = await startMockLLMServer();
  });
  afterAll(() => mock.close());

  it("parses backend specs", () => {
    expect(parseBackend("http://a:1/v1,model=qwen,weight=2")).toEqual({
      url: "http://a:1/v1",
      model: "qwen",
      weight: 2,
    });
    expect(() => parseBackend("http://a:1,colour=red")).toThrow(/bad backend option/);
  });

  it("maps flags to options: raw bodies off by default (as the library), pause defaults, trace header", () => {
    const parse = (...args: string[]) => {
      const program = buildProgram().exitOverride();
      program.parse(["node", "agl-proxy", "--backend", "http://a:1/v1", ...args]);
      return proxyOptionsFromArgs(program.opts(), {});
    };
    const store = { addSpan: async () => null, getNextSpanSequenceId: async () => 1 };
    const defaults = parse();
    const library = resolveOptions({ store, backends: [{ url: "http://a:1/v1" }] });
    for (const key of [
      "captureBodies",
      "retryAfterSeconds",
      "pauseMode",
      "traceHeader",
      "unknownAttempts",
      "logprobs",
      "returnTokenIds",
      "retries",
      "timeoutMs",
    ] as const) {
      expect({ key, value: (defaults as any)[key] }).toEqual({ key, value: library[key] });
    }
    expect(defaults.captureBodies).toBe(false);
    expect(defaults.maxHoldMs).toBeUndefined();
    const set = parse(
      "--capture-bodies",
      "--retry-after-seconds",
      "30",
      "--max-hold-ms",
      "90000",
      "--pause-mode",
      "hold",
      "--trace-header",
      "X-Trace-Id",
      "--unknown-attempts",
      "forward",
    );
    expect(set).toMatchObject({
      captureBodies: true,
      retryAfterSeconds: 30,
      maxHoldMs: 90_000,
      pauseMode: "hold",
      traceHeader: "X-Trace-Id",
      unknownAttempts: "forward",
    });
    expect(() => parse("--retry-after-seconds", "soon")).toThrow(/seconds/);
  });

  it("proxies and records through a --store-module store, requires the admin token, and drains on SIGTERM", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-proxy-cli-"));
    const spansFile = join(dir, "spans.jsonl");
    const modulePath = join(dir, "file-store.mjs");
    writeFileSync(
      modulePath,
      `import { appendFileSync } from "node:fs";
       let seq = 0;
       export function createStore(uri) {
         return {
           async getNextSpanSequenceId() { return ++seq; },
           async addSpan(span) { appendFileSync(${JSON.stringify(spansFile)}, JSON.stringify({ uri, span }) + "\\n"); return span; },
           async close() {},
         };
       }`,
    );
    const { child, url } = await startCli([
      "--backend",
      `${mock.url}/v1,model=served-model`,
      "--store",
      "custom://spans",
      "--store-module",
      modulePath,
      "--port",
      "0",
      "--admin-token",
      "cli-admin-token",
      "--health-interval-ms",
      "0",
    ]);
    try {
      const client = new OpenAI({
        baseURL: `${url}/rollout/ro-1/attempt/at-1/v1`,
        apiKey: "cli-admin-token",
        maxRetries: 0,
      });
      const out = await client.chat.completions.create({
        model: "x",
        messages: [{ role: "user", content: "hello" }],
      });
      expect(out.choices[0]!.message.content).toBe("Echo: hello");
      expect(mock.requests.at(-1)!.body.model).toBe("served-model");
      expect((await fetch(`${url}/proxy/state`)).status).toBe(401);
      expect(
        (await fetch(`${url}/proxy/state`, { headers: { authorization: "Bearer cli-admin-token" } })).status,
      ).toBe(200);
    } finally {
      expect(await stopCli(child)).toBe(0);
    }
    const lines = readFileSync(spansFile, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0].uri).toBe("custom://spans");
    expect(lines[0].span).toMatchObject({ rollout_id: "ro-1", attempt_id: "at-1", sequence_id: 1 });
    expect(lines[0].span.attributes.response_token_ids).toEqual(mockEncode("Echo: hello"));
    // raw bodies are off by default
    expect(lines[0].span.attributes["agl.proxy.request"]).toBeUndefined();
  });

  it("fails clearly on a bad store module", async () => {
    await expect(
      startCli(["--backend", mock.url, "--store-module", "/nonexistent/store.mjs", "--port", "0"]),
    ).rejects.toThrow(/exited with 1/);
  });
});
