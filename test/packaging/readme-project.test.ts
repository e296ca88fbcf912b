/**
 * README.md "Use it in your project", run as written from packed tarballs in a temporary folder: the
 * pack loop covers every package, the project steps (npm init, "type": "module", npm install of the
 * tarballs, tsx) run verbatim, `npx tsx dev.ts` runs the agent, and the packed `agl-worker --agent
 * ./agent.ts` runs the agent module's export, and nothing else (no dev() inside the worker).
 *
 * npm fetches the third-party dependencies (openai, tsx, zod, ...) from the registry or its cache; only
 * @agl/core and @agl/client are packed here (what the README's install line uses).
 */
import { execFile, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { InMemoryLightningStore, llm } from "@agl/core";
import { type MockLLMServer, startMockLLMServer } from "@agl/core/mock-llm";
import { silentServerLogger, startStoreServer } from "@agl/store";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../..", import.meta.url));
const readme = readFileSync(join(root, "README.md"), "utf8");
const start = readme.indexOf("## Use it in your project");
const next = readme.indexOf("\n## ", start + 1);
const section = readme.slice(start, next === -1 ? undefined : next);

/** The fenced code blocks of the section, with their language. */
const blocks = [...section.matchAll(/```(\w+)[^\n]*\n([\s\S]*?)```/g)].map((m) => ({
  lang: m[1]!,
  code: m[2]!,
}));
const tsFile = (name: string) => {
  const block = blocks.find((b) => b.lang === "ts" && b.code.startsWith(`// ${name}`));
  if (!block) throw new Error(`README has no ts block starting with "// ${name}"`);
  return block.code;
};
const setup = blocks
  .find((b) => b.lang === "bash" && b.code.includes("pnpm@10.34.8 pack"))!
  .code.trim()
  .split("\n");

// Registry traffic without audit/fund requests; the npm cache first.
const npmEnv = {
  ...process.env,
  npm_config_prefer_offline: "true",
  npm_config_audit: "false",
  npm_config_fund: "false",
  npm_config_update_notifier: "false",
};

let dir: string;
let mock: MockLLMServer;
let calls = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agl-readme-"));
  // The agent answers "4": the task's answer, so reward 1 shows the whole path worked.
  mock = await startMockLLMServer({
    respond: () => {
      calls++;
      return { content: "4" };
    },
  });
  // dist/ of the two packages (CI has built everything already; then this is a no-op).
  await run(process.execPath, [join(root, "scripts/build-stale.mjs"), "@agl/core", "@agl/client"], {
    cwd: root,
    timeout: 300_000,
  });
  const packs = join(dir, "agl-ts", "dist-packs");
  mkdirSync(packs, { recursive: true });
  for (const p of ["core", "client"]) {
    await run("pnpm", ["pack", "--pack-destination", packs], {
      cwd: join(root, "packages", p),
      timeout: 120_000,
    });
  }
  // The README's steps after the pack loop, verbatim, from agl-ts/ (they cd into ../my-app).
  const steps = setup.slice(2).join("\n");
  await run("bash", ["-euo", "pipefail", "-c", steps], {
    cwd: join(dir, "agl-ts"),
    timeout: 300_000,
    env: npmEnv,
  });
  writeFileSync(join(dir, "my-app", "agent.ts"), tsFile("agent.ts"));
  writeFileSync(join(dir, "my-app", "dev.ts"), tsFile("dev.ts"));
}, 600_000);

afterAll(async () => {
  await mock?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function runInApp(
  command: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, {
    cwd: join(dir, "my-app"),
    env: { ...npmEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once("exit", (code) => resolve({ code, stdout, stderr })));
}

describe('README "Use it in your project"', () => {
  it("packs every package of the repository", () => {
    const loop = setup.find((line) => line.startsWith("for p in "))!;
    const listed = /^for p in ([\w -]+); do/.exec(loop)![1]!.trim().split(/\s+/).sort();
    expect(listed).toEqual(readdirSync(join(root, "packages")).sort());
  });

  it("makes an ES-module project with tsx, installed from the tarballs", () => {
    const manifest = JSON.parse(readFileSync(join(dir, "my-app", "package.json"), "utf8"));
    expect(manifest.type).toBe("module");
    expect(manifest.dependencies["@agl/core"]).toMatch(/^file:.*agl-core-0\.1\.0\.tgz$/);
    expect(manifest.dependencies["@agl/client"]).toMatch(/^file:.*agl-client-0\.1\.0\.tgz$/);
    expect(manifest.devDependencies.tsx).toBeDefined();
  });

  it("npx tsx dev.ts runs the agent against the endpoint (reward 1)", async () => {
    const before = calls;
    const result = await runInApp("npx", ["tsx", "dev.ts"], {
      OPENAI_BASE_URL: mock.baseURL,
      MODEL: "my-model",
      OPENAI_API_KEY: "sk-readme-test",
    });
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout.trim())).toEqual({ succeeded: 1, meanReward: 1 });
    expect(result.stderr).toMatch(/agl dev: 1 rollouts, 1 succeeded/);
    expect(calls - before).toBe(1);
  });

  it("the packed agl-worker runs agent.ts's export and nothing else", async () => {
    const store = new InMemoryLightningStore();
    await store.addResources({
      main_llm: llm({ endpoint: mock.baseURL, model: "my-model", api_key_env: "OPENAI_API_KEY" }),
    });
    const server = await startStoreServer({ store, port: 0, logger: silentServerLogger });
    try {
      const rollout = await store.enqueueRollout({ input: { question: "2+2?", answer: "4" } });
      const before = calls;
      const result = await runInApp(
        "npx",
        ["agl-worker", "--store", server.url, "--agent", "./agent.ts", "--max-rollouts", "1"],
        { OPENAI_API_KEY: "sk-readme-test", AGL_LOG_LEVEL: "warn" },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(JSON.parse(result.stdout.trim())).toMatchObject({ claimed: 1, succeeded: 1 });
      // One LLM call: the worker's rollout. The old agent.ts also ran trainer.dev() on import.
      expect(calls - before).toBe(1);
      expect((await store.getRolloutById(rollout.rollout_id))!.status).toBe("succeeded");
    } finally {
      await server.close();
      await store.close();
    }
  });
});
