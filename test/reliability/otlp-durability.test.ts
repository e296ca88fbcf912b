/**
 * Group commit keeps OTLP's promise: concurrent single-span OTLP exports (a Python runner with
 * OtelTracer sends one request per span) against a store server that is `kill -9`ed mid-burst;
 * every span the server answered 200 for must be there after the restart, with its own sequence id.
 */
import { LightningStoreClient } from "@agl/client";
import { describe, expect, it } from "vitest";
import { createTestDatabase } from "../support/postgres.js";
import { DURABILITY, report } from "./config.js";
import { RestartableStore } from "./processes.js";

const kv = (key: string, value: string) => ({ key, value: { stringValue: value } });

function oneSpan(rid: string, aid: string, spanId: string) {
  return {
    resourceSpans: [
      {
        resource: {
          attributes: [kv("agentlightning.rollout_id", rid), kv("agentlightning.attempt_id", aid)],
        },
        scopeSpans: [
          {
            spans: [
              {
                traceId: "ab".repeat(16),
                spanId,
                name: "llm",
                startTimeUnixNano: "1700000000000000000",
                endTimeUnixNano: "1700000000001000000",
                attributes: [kv("gen_ai.prompt", `prompt ${spanId}`)],
              },
            ],
          },
        ],
      },
    ],
  };
}

async function otlpKillLoop(db: string): Promise<Record<string, number>> {
  const store = await RestartableStore.start(db);
  const client = new LightningStoreClient({ url: store.url, retryDelaysMs: [], timeoutMs: 5_000 });
  const acked = new Map<string, string[]>();
  let spanCounter = 0;
  let failed = 0;
  try {
    const rollouts: Array<{ rid: string; aid: string }> = [];
    for (let i = 0; i < 6; i++) {
      const r = await client.startRollout({ input: { i } });
      rollouts.push({ rid: r.rollout_id, aid: r.attempt.attempt_id });
      acked.set(r.rollout_id, []);
    }
    for (let kill = 0; kill < DURABILITY.kills; kill++) {
      const target = [...acked.values()].reduce((n, s) => n + s.length, 0) + DURABILITY.writesPerKill;
      let stop = false;
      // Each writer exports one span per request, one after another, as OtelTracer does.
      const writer = async ({ rid, aid }: { rid: string; aid: string }) => {
        while (!stop) {
          const spanId = (++spanCounter).toString(16).padStart(16, "0");
          try {
            const res = await fetch(`${store.url}/v1/traces`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify(oneSpan(rid, aid, spanId)),
            });
            if (res.status !== 200) throw new Error(`status ${res.status}`);
            const body = (await res.json()) as { partialSuccess?: { rejectedSpans?: number } };
            if (Number(body.partialSuccess?.rejectedSpans ?? 0) > 0) throw new Error("rejected");
            acked.get(rid)!.push(spanId);
          } catch {
            failed++;
            return;
          }
        }
      };
      const writers = rollouts.map(writer);
      const count = () => [...acked.values()].reduce((n, s) => n + s.length, 0);
      while (count() < target) await new Promise((r) => setTimeout(r, 5));
      await store.kill();
      stop = true;
      await Promise.all(writers);
      await store.killAndRestart(0);
    }
    let missing = 0;
    let duplicateSequenceIds = 0;
    for (const [rid, spanIds] of acked) {
      const stored = (await client.querySpans(rid, { limit: -1 })).items;
      const ids = new Set(stored.map((s) => s.span_id));
      missing += spanIds.filter((id) => !ids.has(id)).length;
      duplicateSequenceIds += stored.length - new Set(stored.map((s) => s.sequence_id)).size;
    }
    return {
      acknowledged_spans: [...acked.values()].reduce((n, s) => n + s.length, 0),
      kills: DURABILITY.kills,
      failed_unacknowledged_requests: failed,
      missing,
      duplicate_sequence_ids: duplicateSequenceIds,
    };
  } finally {
    await client.close();
    await store.kill();
  }
}

describe("kill -9 durability of acknowledged OTLP exports (group commit)", () => {
  it("PostgreSQL: every span answered 200 is stored, sequence ids distinct", async () => {
    const db = await createTestDatabase();
    try {
      const result = await otlpKillLoop(db.url);
      await report("otlp-durability-postgres", result);
      expect(result.missing).toBe(0);
      expect(result.duplicate_sequence_ids).toBe(0);
      expect(result.acknowledged_spans).toBeGreaterThanOrEqual(DURABILITY.kills * DURABILITY.writesPerKill);
    } finally {
      await db.drop();
    }
  }, 300_000);
});
