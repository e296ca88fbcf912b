/** agl-store as a child process: strict --db, the opened store named at start, --version, token warning. */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { type Child, ROOT } from "../store-http/processes.js";
import { cliSpawner } from "./cli-children.js";

const store = cliSpawner("packages/store/src/cli.ts");

/**
 * Resolves once stderr matches `pattern`, checked on every chunk the child writes (an event, not a
 * poll with a time budget): a loaded machine only makes it later. Rejects if the child exits first.
 */
function waitFor(child: Child, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const m = pattern.exec(child.stderr());
      if (!m) return false;
      child.proc.stderr?.off("data", onData);
      resolve(m[0]);
      return true;
    };
    // Deferred, so the Child's own listener has appended the chunk before it is checked.
    const onData = () => setImmediate(check);
    child.proc.stderr?.on("data", onData);
    if (check()) return;
    void child.exited.then(() => {
      if (!check()) reject(new Error(`exited without ${pattern} in: ${child.stderr()}`));
    });
  });
}

/** The complete JSON log lines written so far (a line still being written is left out). */
function logLines(child: Child): Array<{ msg: string; level: number; name: string }> {
  const text = child.stderr();
  return text
    .slice(0, text.lastIndexOf("\n") + 1)
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as { msg: string; level: number; name: string });
}

// Each test starts node + tsx children: seconds each on a loaded machine; the timeout is only a safety net.
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
    // Each line awaited on its own: their order, and whether one is flushed before another, is not the point.
    await waitFor(child, /store server listening/);
    await waitFor(child, /opened SQLite store/);
    await waitFor(child, /has no token/);
    const lines = logLines(child);
    expect(lines.filter((l) => l.msg === `opened SQLite store ${file}`)).toHaveLength(1);
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
