/**
 * Packaging check: build @agl/core and the hello example with their real build scripts, then run the
 * BUILT example in a child process. It resolves `@agl/core` through the package's `exports` to `dist/`,
 * so a missing export, a broken bundle or a dependency left out of package.json fails here, not in users'
 * hands. The core build is skipped when dist is newer than every source file (CI runs `pnpm build` first).
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("..", import.meta.url));
const core = join(root, "packages/core");
const example = join(root, "examples/hello");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

function coreIsBuilt(): boolean {
  const built = ["index.js", "index.d.ts", "mock-llm/index.js"].map((f) => join(core, "dist", f));
  if (!built.every(existsSync)) return false;
  const sources = Math.max(newestMtime(join(core, "src")), statSync(join(core, "package.json")).mtimeMs);
  return built.every((f) => statSync(f).mtimeMs >= sources);
}

describe("built packages", () => {
  beforeAll(async () => {
    if (!coreIsBuilt()) await run("pnpm", ["run", "build"], { cwd: core, timeout: 180_000 });
    await run("pnpm", ["run", "build"], { cwd: example, timeout: 60_000 });
  });

  it("the built example imports @agl/core from dist, not sources", () => {
    const bundle = readFileSync(join(example, "dist/main.js"), "utf8");
    expect(bundle).toMatch(/from ["']@agl\/core["']/);
    expect(bundle).toMatch(/from ["']@agl\/core\/mock-llm["']/);
    expect(bundle).not.toContain("class Runner");
    const manifest = JSON.parse(readFileSync(join(core, "package.json"), "utf8"));
    expect(manifest.exports["."].import).toBe("./dist/index.js");
  });

  it("require() works too: the exports carry a default condition (Node >= 20.19 loads ESM through it)", async () => {
    const manifest = JSON.parse(readFileSync(join(core, "package.json"), "utf8"));
    for (const entry of Object.values(manifest.exports) as Array<Record<string, string>>) {
      expect(entry.default).toBe(entry.import);
    }
    expect(manifest.sideEffects).toBe(false);
    const { stdout } = await run(
      process.execPath,
      ["-e", "const c = require('@agl/core'); process.stdout.write(typeof c.Trainer + ' ' + typeof c.llm)"],
      { cwd: example, timeout: 30_000 },
    );
    expect(stdout).toBe("function function");
  });

  it("runs the built hello example end to end and prints the per-rollout summary", async () => {
    const { stdout, stderr } = await run(process.execPath, [join(example, "dist/main.js")], {
      cwd: example,
      timeout: 60_000,
      env: { ...process.env, AGL_LOG_LEVEL: "warn" },
    });
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toMatch(/^rollout\s+name\s+greeting\s+status\s+reward\s+spans$/);
    const rows = lines.filter((l) => /^ro-[0-9a-f]{12}\s/.test(l)).map((l) => l.split(/\s+/));
    expect(rows.map((r) => [r[1], r[3], r[4], r[5]])).toEqual([
      // The LLM call, the reward, and the agent.rollout span enclosing them.
      ["Ada", "succeeded", "1.00", "3"],
      ["Linus", "succeeded", "1.00", "3"],
      ["Grace", "succeeded", "0.00", "3"],
      ["Alan", "succeeded", "1.00", "3"],
    ]);
    expect(stdout).toContain("rollouts: 4  succeeded: 4  failed: 0  mean reward: 0.750");
    expect(stdout).toContain("LLM calls served: 4");
    // dev() prints its compact table on stderr, leaving stdout to the program.
    expect(stderr).toMatch(/^agl dev: 4 rollouts, 4 succeeded, 0 failed, mean reward 0\.750/m);
  });
});
