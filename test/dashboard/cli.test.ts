/**
 * The built CLIs: `agl-store` serves the dashboard when @agl/dashboard is installed next to it (an
 * optional peer, loaded at run time), and `agl-dashboard --store URL` serves it for a store elsewhere.
 * Packages are built first when their dist is missing (CI's `pnpm build` runs before the tests).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const root = fileURLToPath(new URL("../..", import.meta.url));
const storeCli = join(root, "packages/store/dist/cli.js");
const dashboardCli = join(root, "packages/dashboard/dist/cli.js");
const children: ChildProcess[] = [];

/** Start a CLI and resolve with the URL of its "listening" JSON line on stderr. */
function start(script: string, args: string[]): Promise<string> {
  const child = spawn(process.execPath, [script, ...args], { stdio: ["ignore", "ignore", "pipe"] });
  children.push(child);
  return new Promise((resolve, reject) => {
    let err = "";
    child.stderr!.on("data", (chunk: Buffer) => {
      err += chunk.toString();
      const line = err.split("\n").find((l) => l.includes("listening"));
      if (line) resolve((JSON.parse(line) as { url: string }).url);
    });
    child.once("exit", (code) => reject(new Error(`${script} exited with ${code}: ${err}`)));
  });
}

beforeAll(async () => {
  for (const pkg of ["@agl/core", "@agl/store", "@agl/dashboard"]) {
    const dir = join(root, "packages", pkg.slice(5));
    if (!existsSync(join(dir, "dist/cli.js")) && !existsSync(join(dir, "dist/index.js"))) {
      await run("pnpm", ["run", "build"], { cwd: dir, timeout: 240_000 });
    }
  }
}, 600_000);

afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
});

describe("built CLIs", () => {
  it("agl-store serves the built page at /dashboard/ and keeps the API behind --token", async () => {
    const url = await start(storeCli, ["--db", "memory", "--port", "0", "--token", "t0k", "--quiet"]);
    const page = await fetch(`${url}/dashboard/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<script type="module" src="./app.js">');
    const bundle = await fetch(`${url}/dashboard/app.js`);
    expect(bundle.headers.get("content-type")).toContain("javascript");
    expect((await bundle.text()).length).toBe(
      readFileSync(join(root, "packages/dashboard/dist/assets/app.js"), "utf8").length,
    );
    expect((await fetch(`${url}/v1/agl/statistics`)).status).toBe(401);
  });

  it("agl-store prints the dashboard's URL at start, whatever the log level", async () => {
    const child = spawn(
      process.execPath,
      [storeCli, "--db", "memory", "--port", "0", "--log-level", "error"],
      {
        stdio: ["ignore", "ignore", "pipe"],
        env: { ...process.env, AGL_LOG_FORMAT: "json" },
      },
    );
    children.push(child);
    const line = await new Promise<{ msg: string; dashboard_url: string }>((resolve, reject) => {
      let err = "";
      child.stderr!.on("data", (chunk: Buffer) => {
        err += chunk.toString();
        const found = err.split("\n").find((l) => l.includes("dashboard_url"));
        if (found) resolve(JSON.parse(found));
      });
      child.once("exit", (code) => reject(new Error(`agl-store exited with ${code}: ${err}`)));
    });
    expect(line.dashboard_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/dashboard\/$/);
    expect(line.msg).toBe(`dashboard at ${line.dashboard_url}`);
    expect((await fetch(line.dashboard_url)).status).toBe(200);
  });

  it("agl-store --no-dashboard does not serve it; agl-dashboard --store serves it for that store", async () => {
    const storeUrl = await start(storeCli, ["--db", "memory", "--port", "0", "--no-dashboard", "--quiet"]);
    expect((await fetch(`${storeUrl}/dashboard/`)).status).toBe(404);
    const pageUrl = await start(dashboardCli, ["--store", storeUrl, "--port", "0"]);
    expect((await fetch(pageUrl)).status).toBe(200);
    const stats = await fetch(new URL("/v1/agl/statistics", pageUrl));
    expect(stats.status).toBe(200);
    expect(await stats.json()).toMatchObject({ total_rollouts: 0 });
  });

  it("agl-dashboard rejects a store that is not a URL, naming the option", async () => {
    const result = await run(process.execPath, [dashboardCli, "--store", "localhost:4747"]).catch((e) => e);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain("--store");
  });

  it("agl-dashboard --version prints the package version; a bad --log-level is one line naming the flag", async () => {
    const version = await run(process.execPath, [dashboardCli, "--version"]);
    expect(version.stdout.trim()).toBe(
      JSON.parse(readFileSync(join(root, "packages/dashboard/package.json"), "utf8")).version,
    );
    const bad = await run(process.execPath, [
      dashboardCli,
      "--store",
      "http://127.0.0.1:1",
      "--log-level",
      "verbose",
    ]).catch((e) => e);
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim().split("\n")).toHaveLength(1);
    expect(bad.stderr).toContain("--log-level");
  });
});
