/** agl-store as a child process: strict --db, the opened store named at start, --version, token warning. */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type Child, ROOT } from "../store-http/processes.js";
import { cliSpawner } from "./cli-children.js";

const store = cliSpawner("packages/store/src/cli.ts");

async function waitFor(child: Child, pattern: RegExp): Promise<string> {
  for (let i = 0; i < 300; i++) {
    const m = pattern.exec(child.stderr());
    if (m) return m[0];
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no ${pattern} in: ${child.stderr()}`);
}

describe("agl-store flags", () => {
  it("a bare word --db is an error naming the flag, and no file is created", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-db-"));
    for (const word of ["postgres", "mem"]) {
      const child = store(["--db", word, "--port", "0"]);
      await expect(child.exited).resolves.not.toBe(0);
      expect(child.stderr()).toMatch(new RegExp(`--db.*"${word}" is not a store URI`));
    }
    expect(existsSync(join(ROOT, "postgres")) || existsSync(join(ROOT, "mem"))).toBe(false);
    void dir;
  });

  it("a SQLite file in a missing directory names the directory", async () => {
    const child = store(["--db", "sqlite:/nonexistent-agl-dir/sub/agl.db", "--port", "0"]);
    expect(await child.exited).toBe(1);
    expect(child.stderr()).toMatch(/directory \/nonexistent-agl-dir\/sub does not exist/);
    expect(child.stderr()).not.toMatch(/^\s+at /m);
  });

  it("--version prints the package version", async () => {
    const child = store(["--version"]);
    expect(await child.exited).toBe(0);
    expect(child.stdout().trim()).toBe(
      JSON.parse(readFileSync("packages/store/package.json", "utf8")).version,
    );
  });
});

describe("agl-store start-up lines", () => {
  it("names the opened store and file, and warns when open on a non-loopback address", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-db-"));
    const file = join(dir, "agl.db");
    const child = store([
      "--db",
      `sqlite:${file}`,
      "--port",
      "0",
      "--host",
      "0.0.0.0",
      "--log-level",
      "info",
      "--no-dashboard",
    ]);
    await waitFor(child, /store server listening/);
    const lines = child
      .stderr()
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { msg: string; level: number; name: string });
    expect(lines[0]!.msg).toBe(`opened SQLite store ${file}`);
    expect(lines.every((l) => l.name === "agl-store")).toBe(true);
    const warning = lines.find((l) => l.msg.includes("has no token"));
    expect(warning?.level).toBe(40);
    expect(child.stdout()).toBe("");
    child.proc.kill("SIGINT");
    expect(await child.exited).toBe(0);
  });

  it("with a token on loopback there is no warning", async () => {
    const child = store([
      "--db",
      "memory",
      "--port",
      "0",
      "--token",
      "t",
      "--log-level",
      "info",
      "--no-dashboard",
    ]);
    await waitFor(child, /store server listening/);
    expect(child.stderr()).toMatch(/opened in-memory store/);
    expect(child.stderr()).not.toMatch(/has no token/);
  });
});
