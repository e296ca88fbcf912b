/**
 * kill -9 durability of acknowledged writes: writers start rollouts, add spans and finish attempts
 * against a store server that is SIGKILLed again and again; everything the server acknowledged must
 * be there after the last restart.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LightningStoreClient } from "@agl/client";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { DURABILITY, report } from "./config.js";
import { RestartableStore } from "./processes.js";

interface Acked {
  rolloutId: string;
  input: { w: number; i: number };
  spanId?: string;
  succeeded?: boolean;
}

async function killLoop(db: string): Promise<Record<string, number>> {
  const store = await RestartableStore.start(db);
  // No client retries: an answer is an acknowledgement, anything else is not counted.
  const client = new LightningStoreClient({ url: store.url, retryDelaysMs: [], timeoutMs: 5_000 });
  const acked: Acked[] = [];
  let failedWrites = 0;
  try {
    for (let kill = 0; kill < DURABILITY.kills; kill++) {
      const target = acked.length + DURABILITY.writesPerKill;
      let stop = false;
      const writer = async (w: number) => {
        for (let i = 0; !stop; i++) {
          try {
            const input = { w: kill * 100 + w, i };
            const started = await client.startRollout({ input });
            const entry: Acked = { rolloutId: started.rollout_id, input };
            acked.push(entry);
            const span = await client.addSpan({
              rollout_id: started.rollout_id,
              attempt_id: started.attempt.attempt_id,
              sequence_id: 1,
              trace_id: "ab".repeat(16),
              span_id: `${kill}-${w}-${i}`,
              name: "work",
            });
            entry.spanId = span!.span_id;
            await client.updateAttempt(started.rollout_id, started.attempt.attempt_id, {
              status: "succeeded",
            });
            entry.succeeded = true;
          } catch {
            failedWrites++;
            return;
          }
        }
      };
      const writers = Array.from({ length: 6 }, (_, w) => writer(w));
      while (acked.length < target) await new Promise((r) => setTimeout(r, 5));
      // Mid-burst: writes are in flight when the process dies.
      await store.kill();
      stop = true;
      await Promise.all(writers);
      await new Promise((r) => setTimeout(r, 200));
      await store.killAndRestart(0);
    }
    let missing = 0;
    for (const a of acked) {
      const r = await client.getRolloutById(a.rolloutId);
      const input = r?.input as Acked["input"] | undefined;
      // Compared field by field: PostgreSQL's jsonb does not keep key order.
      if (!input || input.w !== a.input.w || input.i !== a.input.i) {
        missing++;
        continue;
      }
      if (a.spanId) {
        const spans = (await client.querySpans(a.rolloutId)).items;
        if (!spans.some((s) => s.span_id === a.spanId)) missing++;
      }
      if (a.succeeded && r?.status !== "succeeded") missing++;
    }
    return {
      acknowledged_rollouts: acked.length,
      acknowledged_spans: acked.filter((a) => a.spanId).length,
      acknowledged_successes: acked.filter((a) => a.succeeded).length,
      kills: DURABILITY.kills,
      failed_unacknowledged_writes: failedWrites,
      missing,
    };
  } finally {
    await client.close();
    await store.kill();
  }
}

describe("kill -9 durability of acknowledged writes", () => {
  it("SQLite", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-kill9-"));
    try {
      const result = await killLoop(`sqlite:${join(dir, "agl.db")}`);
      await report("durability-sqlite", result);
      expect(result.missing).toBe(0);
      expect(result.acknowledged_rollouts).toBeGreaterThanOrEqual(
        DURABILITY.kills * DURABILITY.writesPerKill,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 300_000);

  it("PostgreSQL", async () => {
    const db = await createTestDatabase();
    try {
      const result = await killLoop(db.url);
      await report("durability-postgres", result);
      expect(result.missing).toBe(0);
      expect(result.acknowledged_rollouts).toBeGreaterThanOrEqual(
        DURABILITY.kills * DURABILITY.writesPerKill,
      );
    } finally {
      await db.drop();
    }
  }, 300_000);
});
