/**
 * A key given with --api-key reaches the agent and the optimiser (the mock endpoint sees it on every
 * call) but never the store: the SQLite files hold only the reference (api_key_env).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { mockOptimizerResponder } from "@agl/apo/mock-optimizer";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import { afterEach, expect, it } from "vitest";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const KEY = "sk-apo-test-5f0c1d2e3b4a69788796a5b4c3d2e1f0";

let server: MockLLMServer | undefined;
const dirs: string[] = [];
afterEach(async () => {
  await server?.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", main, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, OPENAI_API_KEY: "", AGL_LOG_LEVEL: "warn" },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr })));
}

it("--api-key: the endpoint gets the key, the store only its reference", async () => {
  const respond = mockOptimizerResponder({ gradientModel: "mock-critic", editModel: "mock-editor" });
  const authorizations = new Set<string>();
  server = await startMockLLMServer({
    respond: (request) => {
      authorizations.add(String(request.headers.authorization));
      return respond(request);
    },
  });
  const dir = mkdtempSync(join(tmpdir(), "apo-agent-key-"));
  dirs.push(dir);
  const db = join(dir, "apo.db");
  const result = await run([
    "--base-url",
    server.baseURL,
    "--api-key",
    KEY,
    "--model",
    "mock-model",
    "--gradient-model",
    "mock-critic",
    "--edit-model",
    "mock-editor",
    "--rounds",
    "1",
    "--train-size",
    "4",
    "--val-size",
    "4",
    "--runners",
    "1",
    "--db",
    db,
  ]);
  expect(result.code, result.stderr).toBe(0);
  expect(result.stdout).toMatch(/validation reward: seed 0\.000 -> best/);
  // Agent and optimiser calls both carried the key.
  expect([...authorizations]).toEqual([`Bearer ${KEY}`]);
  // The store: the database and whatever WAL/journal files it left, as bytes.
  const files = [db, `${db}-wal`, `${db}-shm`, `${db}-journal`].filter(existsSync);
  expect(files).toContain(db);
  const needle = Buffer.from(KEY);
  for (const file of files) expect(readFileSync(file).indexOf(needle), file).toBe(-1);
  const text = readFileSync(db).toString("latin1");
  expect(text).toMatch(/"api_key_env":"APO_AGENT_API_KEY_[0-9A-F]{12}"/);
});
