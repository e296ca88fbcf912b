import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { report, SOAK } from "./config.js";
import { runSoak } from "./soak.js";

const expectClean = (r: Awaited<ReturnType<typeof runSoak>>) => {
  expect({
    lost: r.lost,
    doubled: r.doubled,
    stuck: r.stuck,
    succeededWithoutSpans: r.succeededWithoutSpans,
  }).toEqual({ lost: 0, doubled: 0, stuck: 0, succeededWithoutSpans: 0 });
  // Fifty attempts each: every rollout gets through the chaos.
  expect(r.succeeded).toBe(SOAK.rollouts);
  expect(r.workerKills).toBe(SOAK.workerKills);
  expect(r.storeRestarts + r.storeFreezes).toBe(SOAK.storeRestarts);
};

describe("soak: SIGKILLed workers and store restarts", () => {
  it(
    "memory (store frozen with SIGSTOP instead of killed): no lost, doubled or stuck rollout, no succeeded attempt without its spans",
    async () => {
      const result = await runSoak({ db: "memory", ...SOAK, storeOutage: "freeze" });
      await report("soak-memory", { ...result });
      expectClean(result);
    },
    SOAK.timeoutMs + 120_000,
  );

  it(
    "SQLite: no lost, doubled or stuck rollout, no succeeded attempt without its spans",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "agl-soak-"));
      try {
        const result = await runSoak({ db: `sqlite:${join(dir, "agl.db")}`, ...SOAK });
        await report("soak-sqlite", { ...result });
        expectClean(result);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    SOAK.timeoutMs + 120_000,
  );

  it(
    "PostgreSQL: no lost, doubled or stuck rollout, no succeeded attempt without its spans",
    async () => {
      const db = await createTestDatabase();
      try {
        const result = await runSoak({ db: db.url, ...SOAK });
        await report("soak-postgres", { ...result });
        expectClean(result);
      } finally {
        await db.drop();
      }
    },
    SOAK.timeoutMs + 120_000,
  );
});
