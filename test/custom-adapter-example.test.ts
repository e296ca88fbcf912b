/**
 * Packaging check for @agl/adapter: build it and examples/custom-adapter with their real build scripts,
 * then run the BUILT example, which resolves @agl/adapter and @agl/core through their `exports` to dist/.
 * Builds are skipped when dist is newer than every source file (CI runs `pnpm build` first).
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const example = join(root, "examples/custom-adapter");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function isBuilt(pkg: string, files: string[]): boolean {
  const built = files.map((f) => join(pkg, "dist", f));
  if (!built.every(existsSync)) return false;
  const sources = Math.max(newestMtime(join(pkg, "src")), statSync(join(pkg, "package.json")).mtimeMs);
  return built.every((f) => statSync(f).mtimeMs >= sources);
}

describe("custom-adapter example (built)", () => {
  beforeAll(async () => {
    const core = join(root, "packages/core");
    const adapter = join(root, "packages/adapter");
    if (!isBuilt(core, ["index.js", "index.d.ts", "mock-llm/index.js"])) {
      await run("pnpm", ["run", "build"], { cwd: core, timeout: 180_000 });
    }
    if (!isBuilt(adapter, ["index.js", "index.d.ts"]))
      await run("pnpm", ["run", "build"], { cwd: adapter, timeout: 180_000 });
    await run("pnpm", ["run", "build"], { cwd: example, timeout: 60_000 });
  }, 400_000);

  it("imports @agl/adapter from dist and prints per-rollout rows, diagnostics and a trace", async () => {
    const bundle = readFileSync(join(example, "dist/main.js"), "utf8");
    expect(bundle).toMatch(/from ["']@agl\/adapter["']/);
    expect(bundle).not.toContain("class TraceToTriplets");

    const { stdout } = await run(process.execPath, [join(example, "dist/main.js")], {
      cwd: example,
      timeout: 60_000,
      env: { ...process.env, AGL_LOG_LEVEL: "warn" },
    });
    const summaries = stdout.split("\n").filter((l) => /^ro-[0-9a-f]{12}: /.test(l));
    expect(summaries).toHaveLength(3);
    for (const line of summaries) expect(line).toMatch(/: 2 LLM calls, 1 tool calls \(add\)$/);
    // the mock server tokenises the JSON of the whole conversation, so turn 2 never extends turn 1:
    // two rows per rollout, the mismatch reported; the tool-use bonus lands on the first row
    const rows = stdout.split("\n").filter((l) => l.startsWith("  row: "));
    expect(rows).toHaveLength(6);
    expect(rows.filter((r) => r.endsWith("reward 0.1"))).toHaveLength(3);
    expect(rows.filter((r) => r.endsWith("reward 1"))).toHaveLength(3);
    expect(stdout).toMatch(/warning prefix_mismatch ×3: triplet 1: prompt does not extend/);
    expect(stdout).toMatch(/openai\.chat\.completion .*\[LLM #1 reward=1, \d+\+\d+ tok\]/);
    expect(stdout).toMatch(/agentlightning\.annotation .*\[reward 1 → LLM #1\]/);
  });
});
