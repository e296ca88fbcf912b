import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { llm, promptTemplate, silentLogger, Trainer } from "@agl/core";
import { openStore } from "@agl/store";
import { afterEach, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../test/support/postgres.js";
import { APO, type ApoResult } from "./apo.js";
import { bestPrompt, loadPromptHistory } from "./history.js";
import { mockArithmeticTasks } from "./mock-optimizer/index.js";
import type { ApoOptions } from "./options.js";
import { arithmeticAgent, SEED_TEMPLATE, startMockWorld } from "./test-helpers.js";

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

type Backend = "sqlite" | "postgres";

/** A store URI of each backend, fresh per test. */
async function storeUri(backend: Backend): Promise<string> {
  if (backend === "postgres") {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    return db.url;
  }
  const dir = mkdtempSync(join(tmpdir(), "agl-apo-resume-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return `sqlite:${join(dir, "apo.db")}`;
}

async function setUp(backend: Backend = "sqlite") {
  const { server, counts } = await startMockWorld();
  cleanups.push(() => server.close());
  const uri = await storeUri(backend);
  const run = async (options: ApoOptions, seed = SEED_TEMPLATE) => {
    // A fresh store object per run, as after a restart of the process.
    const store = await openStore(uri);
    try {
      const trainer = new Trainer({
        logger: silentLogger,
        store,
        runnerConcurrency: 4,
        pollIntervalMs: 5,
        initialResources: {
          main_llm: llm({ endpoint: server.baseURL, model: "mock-model", api_key: "none" }),
          prompt_template: promptTemplate(seed),
        },
        algorithm: new APO({
          baseURL: server.baseURL,
          gradientModel: "mock-critic",
          applyEditModel: "mock-editor",
          gradientBatchSize: 4,
          valBatchSize: 4,
          beamWidth: 2,
          branchFactor: 2,
          pollIntervalMs: 50,
          ...options,
        }),
      });
      const { result } = await trainer.fit<unknown, ApoResult>(arithmeticAgent, mockArithmeticTasks(4), {
        valDataset: mockArithmeticTasks(4, 20),
      });
      return result;
    } finally {
      await store.close();
    }
  };
  return { uri, run, counts };
}

describe.each(["sqlite", "postgres"] as const)("resuming an APO run from its store (%s)", (backend) => {
  it("continues after the last completed round with the stored beam, versions and best", async () => {
    const { uri, run, counts } = await setUp(backend);
    const first = await run({ beamRounds: 1 });
    expect(first.resumedAfterRound).toBe(0);
    const store = await openStore(uri);
    const afterFirst = (await loadPromptHistory(store))!;
    await store.close();
    expect(afterFirst.completedRounds).toBe(1);
    const gradientCallsBefore = counts.gradient;

    const second = await run({ beamRounds: 2 });
    expect(second.resumedAfterRound).toBe(1);
    expect(second.rounds.map((r) => r.round)).toEqual([2]);
    // No second seed validation: the seed's score comes from the store.
    expect(second.initialScore).toBe(first.initialScore);
    expect(counts.gradient - gradientCallsBefore).toBe(4);
    // Round 2's parents are round 1's beam.
    expect(new Set(second.rounds[0]!.parents)).toEqual(new Set(afterFirst.beam));
    expect(second.best.score).toBeGreaterThanOrEqual(first.best.score);

    const reopened = await openStore(uri);
    const history = (await loadPromptHistory(reopened))!;
    const versions = history.versions.map((v) => v.version);
    expect(versions.filter((v) => v === "v0")).toHaveLength(1);
    // Version numbers continue where the first run stopped.
    const firstMax = Math.max(...afterFirst.versions.map((v) => Number(v.version.slice(1))));
    for (const c of second.rounds[0]!.candidates) expect(Number(c.slice(1))).toBeGreaterThan(firstMax);
    expect(history.completedRounds).toBe(2);
    // The run record counts the problems of both sessions.
    expect(history.problems.duplicate ?? 0).toBe(
      (first.problems.duplicate ?? 0) + (second.problems.duplicate ?? 0),
    );
    expect((await bestPrompt(reopened))!.version).toBe(second.best.version);
    expect(await loadPromptHistory(reopened, { runId: "nope" })).toBeNull();
    await reopened.close();

    // Done already: resuming with the same number of rounds does nothing more.
    const third = await run({ beamRounds: 2 });
    expect(third.rounds).toEqual([]);
    expect(third.best).toEqual(second.best);
  });

  it("refuses to overwrite a stored run, or to resume a run of another prompt", async () => {
    const { run } = await setUp(backend);
    await run({ beamRounds: 0 });
    await expect(run({ beamRounds: 0, resume: false })).rejects.toThrow(/already has an APO run "apo"/);
    await expect(run({ beamRounds: 0 }, "Another prompt: {question}")).rejects.toThrow(
      /optimises another prompt/,
    );
    await expect(
      run({ beamRounds: 0, runId: "second" }, "Another prompt: {question}"),
    ).resolves.toMatchObject({
      runId: "second",
    });
  });
});

describe("agl-apo CLI", () => {
  it("prints the history and the best prompt of a run in a SQLite store", async () => {
    const { uri, run } = await setUp("sqlite");
    const dbPath = uri.slice("sqlite:".length);
    const result = await run({ beamRounds: 1 });
    const cli = fileURLToPath(new URL("./cli.ts", import.meta.url));
    const exec = (args: string[]) =>
      spawnSync(process.execPath, ["--import", "tsx", cli, ...args], { encoding: "utf8", timeout: 60_000 });
    const history = exec(["history", "--db", uri]);
    expect(history.status).toBe(0);
    expect(history.stdout).toMatch(/^APO run "apo"/);
    expect(history.stdout).toMatch(/^v0\s+-\s+0\s+/m);
    expect(history.stdout).toContain("=== v0 (seed)");
    const best = exec(["best", "--db", dbPath]);
    expect(best.status).toBe(0);
    expect(best.stdout.trimEnd()).toBe(result.best.template.template);
    // --version on stdout; an unknown --log-level is one line naming the flag, exit 1
    const version = exec(["--version"]);
    expect(version.status).toBe(0);
    expect(version.stdout.trim()).toBe(
      JSON.parse(readFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), "utf8")).version,
    );
    const badLevel = exec(["history", "--db", uri, "--log-level", "verbose"]);
    expect(badLevel.status).toBe(1);
    expect(badLevel.stderr.trim().split("\n")).toHaveLength(1);
    expect(badLevel.stderr).toContain("--log-level");
    // A missing file is an error naming it, and no database appears there.
    const missing = join(dirname(dbPath), "typo.db");
    const none = exec(["best", "--db", missing]);
    expect(none.status).toBe(1);
    expect(none.stderr).toContain(`no SQLite store at ${missing}`);
    expect(existsSync(missing)).toBe(false);
    // Six CLI processes one after another (tsx start-up each): room on a loaded machine.
  });
});
