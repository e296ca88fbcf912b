/**
 * The top of the span sequence range through OTLP/JSON on every backend: a span carrying the largest
 * accepted sequence id must not stop the rest of its rollout from being stored (the store used to hand
 * out one more than its own input rule accepts, so every later span of the rollout was rejected).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { InMemoryLightningStore, type LightningStore, MAX_SPAN_SEQUENCE_ID } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase } from "../../../../../test/support/postgres.js";
import { PostgresLightningStore } from "../../postgres/postgres-store.js";
import { SqliteLightningStore } from "../../sqlite/sqlite-store.js";
import { harness } from "./helpers.js";

let db: { url: string; drop: () => Promise<void> };
const dir = mkdtempSync(join(tmpdir(), "agl-otlp-seq-"));
beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
  rmSync(dir, { recursive: true, force: true });
});

const backends: Array<[string, () => Promise<LightningStore>]> = [
  ["memory", async () => new InMemoryLightningStore()],
  ["sqlite", async () => new SqliteLightningStore(join(dir, "store.db"))],
  [
    "postgres",
    () => PostgresLightningStore.connect(db.url, { schema: `otlpseq${process.pid}`, poolSize: 2 }),
  ],
];

let spanCounter = 0;
function otlpSpan(sequenceId?: number) {
  spanCounter++;
  return {
    traceId: "0123456789abcdef0123456789abcdef",
    spanId: spanCounter.toString(16).padStart(16, "0"),
    name: `s${spanCounter}`,
    startTimeUnixNano: "1700000000000000000",
    endTimeUnixNano: "1700000001000000000",
    attributes:
      sequenceId === undefined
        ? []
        : [{ key: "agentlightning.span_sequence_id", value: { intValue: String(sequenceId) } }],
  };
}

function otlpBody(rolloutId: string, attemptId: string, spans: unknown[]) {
  return {
    resourceSpans: [
      {
        resource: {
          attributes: [
            { key: "agentlightning.rollout_id", value: { stringValue: rolloutId } },
            { key: "agentlightning.attempt_id", value: { stringValue: attemptId } },
          ],
        },
        scopeSpans: [{ spans }],
      },
    ],
  };
}

describe("OTLP/JSON at the top of the sequence range", () => {
  for (const [name, open] of backends) {
    it(`${name}: a span with sequence id 2^30 leaves the rest of the rollout storable`, async () => {
      const h = await harness({ store: await open() });
      try {
        const r = await h.store.startRollout({ input: 1 });
        const post = (spans: unknown[]) =>
          h.call("POST", "/v1/traces", otlpBody(r.rollout_id, r.attempt.attempt_id, spans));
        expect((await post([otlpSpan(MAX_SPAN_SEQUENCE_ID)])).status).toBe(200);
        // Spans without an id get one allocated; with the counter at the top that is still accepted.
        for (let i = 0; i < 3; i++) {
          const answer = await post([otlpSpan(), otlpSpan()]);
          expect(answer.status, JSON.stringify(answer.body)).toBe(200);
        }
        // An explicit id out of range is refused alone (OTLP partial success), not the whole request.
        const outOfRange = await post([otlpSpan(MAX_SPAN_SEQUENCE_ID + 1)]);
        expect(outOfRange.status).toBe(200);
        expect(outOfRange.body.partialSuccess).toMatchObject({
          rejectedSpans: "1",
          errorMessage: expect.stringMatching(/sequence_id/),
        });
        const spans = (await h.store.querySpans(r.rollout_id)).items;
        expect(spans).toHaveLength(7);
        expect(new Set(spans.map((s) => s.sequence_id))).toEqual(new Set([MAX_SPAN_SEQUENCE_ID]));
        const next = await h.call("POST", "/v1/agl/spans/next", {
          rollout_id: r.rollout_id,
          attempt_id: r.attempt.attempt_id,
        });
        expect(next.body).toEqual({ sequence_id: MAX_SPAN_SEQUENCE_ID });
        await h.store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
        expect((await h.store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
      } finally {
        await h.close();
      }
    });
  }
});
