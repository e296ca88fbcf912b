/**
 * agl-worker as a child process: fail fast with one line, logs on stderr and results on stdout,
 * validated flags, --version, TypeScript agents, module errors with file and line, and a hung agent
 * that no longer lets the process exit while it holds a rollout.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, llm } from "@agl/core";
import { silentServerLogger, startStoreServer } from "@agl/store";
import { describe, expect, it } from "vitest";
import { cliSpawner } from "./cli-children.js";

const worker = cliSpawner("packages/client/src/cli.ts");

async function storeServer(token?: string) {
  const store = new InMemoryLightningStore();
  await store.addResources({ main: llm({ endpoint: "http://127.0.0.1:9/v1", model: "m" }) });
  const server = await startStoreServer({ store, port: 0, logger: silentServerLogger, token: token ?? null });
  return { store, server };
}

const nonEmptyLines = (text: string) => text.split("\n").filter((l) => l.trim() !== "");

describe("agl-worker fails fast with one line", () => {
  it("an unreachable store: one line per retry, then exit 1 naming the URL, no stack", async () => {
    const child = worker([
      "--store",
      "http://127.0.0.1:9",
      "--agent",
      "test/cli/fixtures/typed-agent.ts",
      "--startup-timeout-seconds",
      "1",
      "--log-format",
      "json",
    ]);
    expect(await child.exited).toBe(1);
    const lines = nonEmptyLines(child.stderr());
    const last = lines.at(-1)!;
    expect(last).toMatch(
      /^agl-worker: could not reach the store server at http:\/\/127\.0\.0\.1:9 within 1 s/,
    );
    const retries = lines.slice(0, -1).map((l) => JSON.parse(l) as { msg: string; level: number });
    expect(retries.length).toBeGreaterThanOrEqual(1);
    for (const r of retries) expect(r.msg).toMatch(/not reachable \(try \d\).*retrying in/);
    expect(child.stderr()).not.toMatch(/^\s+at /m);
    expect(child.stdout()).toBe("");
  });

  it("a wrong token exits 1 at once with the fix, without retrying", async () => {
    const { server, store } = await storeServer("right");
    try {
      const child = worker([
        "--store",
        server.url,
        "--agent",
        "test/cli/fixtures/typed-agent.ts",
        "--token",
        "wrong",
      ]);
      expect(await child.exited).toBe(1);
      expect(nonEmptyLines(child.stderr())).toEqual([
        expect.stringMatching(/401 Unauthorized.*--token or AGL_STORE_TOKEN/),
      ]);
      expect(child.stdout()).toBe("");
    } finally {
      await server.close();
      await store.close();
    }
  });
});

describe("agl-worker flags", () => {
  it("--version prints the package version on stdout", async () => {
    const child = worker(["--version"]);
    expect(await child.exited).toBe(0);
    const { version } = JSON.parse(readFileSync("packages/client/package.json", "utf8"));
    expect(child.stdout().trim()).toBe(version);
  });

  it("an unknown --log-level is an error naming the flag and the valid levels", async () => {
    const child = worker(["--store", "http://127.0.0.1:9", "--agent", "x.js", "--log-level", "verbose"]);
    expect(await child.exited).not.toBe(0);
    expect(child.stderr()).toMatch(/--log-level.*verbose.*debug, info, warn, error, silent/);
  });

  it("a store URL without a scheme is an error showing the fix", async () => {
    const child = worker(["--store", "127.0.0.1:4747", "--agent", "x.js"]);
    expect(await child.exited).not.toBe(0);
    expect(child.stderr()).toMatch(/--store.*did you mean "http:\/\/127\.0\.0\.1:4747"/);
  });

  it("a syntax error in the agent module names the file and line", async () => {
    // Written at test time: a file that does not parse cannot live in the linted tree.
    const dir = mkdtempSync(join(tmpdir(), "agl-agent-"));
    const broken = join(dir, "broken-agent.mjs");
    writeFileSync(
      broken,
      "export default async function agent(task) {\n  const x = task.a +;\n  return x;\n}\n",
    );
    const child = worker(["--store", "http://127.0.0.1:9", "--agent", broken]);
    expect(await child.exited).toBe(1);
    expect(child.stderr()).toMatch(/broken-agent\.mjs:2:\d+: /);
  });
});

describe("agl-worker runs", () => {
  it("runs a .ts agent; stdout is only the JSON summary, logs are on stderr", async () => {
    const { server, store } = await storeServer();
    try {
      const r = await store.enqueueRollout({ input: { a: 1, b: 2 } });
      const child = worker([
        "--store",
        server.url,
        "--agent",
        "test/cli/fixtures/typed-agent.ts",
        "--max-rollouts",
        "1",
        "--poll-interval-ms",
        "20",
        "--log-level",
        "info",
        "--log-format",
        "json",
      ]);
      expect(await child.exited, child.stderr()).toBe(0);
      expect(JSON.parse(child.stdout())).toMatchObject({ claimed: 1, succeeded: 1 });
      // Under --log-format json every stderr line is JSON, the start line included.
      const logs = nonEmptyLines(child.stderr()).map(
        (l) => JSON.parse(l) as { msg: string; name: string; level: number; concurrency?: number },
      );
      expect(logs[0]).toMatchObject({ name: "agl-worker", level: 30, concurrency: 1 });
      expect(logs[0]!.msg).toMatch(/store http:\/\/\S+ is an agl-ts store server/);
      expect(
        logs.some((l) => l.name === "agl-worker" && l.msg.includes("done: 1 claimed, 1 succeeded")),
      ).toBe(true);
      expect((await store.getRolloutById(r.rollout_id))!.status).toBe("succeeded");
    } finally {
      await server.close();
      await store.close();
    }
  });

  it("a hung agent keeps the worker alive until its deadline; then the rollout times out and the worker reports it", async () => {
    const { server, store } = await storeServer();
    try {
      const r = await store.enqueueRollout({ input: 1 });
      const child = worker([
        "--store",
        server.url,
        "--agent",
        "test/cli/fixtures/hung-agent.mjs",
        "--max-rollouts",
        "1",
        "--timeout-seconds",
        "1.5",
        "--grace-period-ms",
        "100",
      ]);
      expect(await child.exited, child.stderr()).toBe(0);
      // The agent ignores its signal: the worker logs it abandoned, and the summary counts it.
      expect(JSON.parse(child.stdout())).toMatchObject({ claimed: 1, stale: 1, abandoned: 1, succeeded: 0 });
      expect((await store.getLatestAttempt(r.rollout_id))!.status).toBe("timeout");
      expect(child.stderr()).toMatch(/passed its 1\.5 s timeout/);
      expect(child.stderr()).toMatch(/ignored its abort signal.*abandoned/);
    } finally {
      await server.close();
      await store.close();
    }
  });
});
