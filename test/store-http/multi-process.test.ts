import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LightningStore, llm } from "@agl/core";
import {
  PostgresLightningStore,
  SqliteLightningStore,
  silentServerLogger,
  startStoreServer,
} from "@agl/store";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { spawnWorker } from "./processes.js";

const ROLLOUTS = 2000;
const WORKERS = 4;
const AGENT = "test/store-http/fixtures/quick-agent.mjs";
// ~10-25 s on an idle 2-core machine, several minutes on one shared with other work (a CI run beside a
// CPU hog took over 100 s). So the wait is for progress, not for a time: it fails only when no rollout
// finishes for STALL_SECONDS, which a stuck claim would cause on any machine.
const STALL_SECONDS = 60;
const TEST_TIMEOUT_MS = 900_000;

/** Waits until every rollout finished; throws when none finished for `STALL_SECONDS`. */
async function waitWhileProgressing(store: LightningStore, ids: string[]): Promise<number> {
  let finished = 0;
  for (;;) {
    const now = (await store.waitForRollouts(ids, { timeoutSeconds: STALL_SECONDS })).length;
    if (now === ids.length || now === finished) return now;
    finished = now;
  }
}

/**
 * One store server (in this process) and WORKERS agl-worker processes claiming ROLLOUTS rollouts:
 * every rollout must be claimed exactly once (one attempt) and end succeeded.
 */
async function claimOnceAcrossProcesses(store: LightningStore): Promise<void> {
  const server = await startStoreServer({ store, port: 0, logger: silentServerLogger });
  const workers: ReturnType<typeof spawnWorker>[] = [];
  try {
    await store.addResources({ main: llm({ endpoint: "http://unused/v1", model: "m" }) });
    const ids: string[] = [];
    for (let i = 0; i < ROLLOUTS; i += 500) {
      const batch = Array.from({ length: Math.min(500, ROLLOUTS - i) }, (_, j) => ({ input: { n: i + j } }));
      ids.push(...(await store.enqueueManyRollouts(batch)).map((r) => r.rollout_id));
    }
    for (let w = 0; w < WORKERS; w++) {
      workers.push(
        spawnWorker(server.url, AGENT, [
          "--concurrency",
          "8",
          "--poll-interval-ms",
          "50",
          "--worker-id",
          `proc-${w}`,
        ]),
      );
    }
    const finished = await waitWhileProgressing(store, ids);
    expect(finished, workers.map((w) => w.stderr()).join("\n")).toBe(ROLLOUTS);

    for (const w of workers) w.proc.kill("SIGTERM");
    const codes = await Promise.all(workers.map((w) => w.exited));
    expect(codes, workers.map((w) => w.stderr()).join("\n")).toEqual(workers.map(() => 0));
    const summaries = workers.map((w) => JSON.parse(w.stdout().trim().split("\n").pop()!));
    expect(summaries.reduce((sum, s) => sum + s.claimed, 0)).toBe(ROLLOUTS);
    expect(summaries.reduce((sum, s) => sum + s.succeeded, 0)).toBe(ROLLOUTS);
    for (const s of summaries) expect(s.claimed).toBeGreaterThan(0);

    const all = await store.queryRollouts({ limit: -1 });
    expect(all.total).toBe(ROLLOUTS);
    const byWorker = new Map<string, number>();
    for (const r of all.items) {
      expect(r.status).toBe("succeeded");
      const attempt = (r as { attempt?: { sequence_id: number; worker_id: string | null } }).attempt!;
      expect(attempt.sequence_id).toBe(1);
      byWorker.set(attempt.worker_id!, (byWorker.get(attempt.worker_id!) ?? 0) + 1);
    }
    expect([...byWorker.keys()].sort()).toEqual(["proc-0", "proc-1", "proc-2", "proc-3"]);
    const stats = await store.statistics();
    expect(stats.total_attempts).toBe(ROLLOUTS);
  } finally {
    for (const w of workers) if (w.proc.exitCode === null) w.proc.kill("SIGKILL");
    await server.close();
  }
}

describe("multi-process workers against one store server", () => {
  it(
    "SQLite: 4 worker processes claim 2,000 rollouts, each exactly once",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "agl-mp-sqlite-"));
      const store = new SqliteLightningStore(join(dir, "store.db"));
      try {
        await claimOnceAcrossProcesses(store);
      } finally {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "PostgreSQL: 4 worker processes claim 2,000 rollouts, each exactly once",
    async () => {
      const db = await createTestDatabase();
      const store = await PostgresLightningStore.connect(db.url, { poolSize: 16 });
      try {
        await claimOnceAcrossProcesses(store);
      } finally {
        await store.close();
        await db.drop();
      }
    },
    TEST_TIMEOUT_MS,
  );
});
