import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LightningStoreClient } from "@agl/client";
import { describe, expect, it } from "vitest";
import { spawnStoreServer } from "./processes.js";

interface Acked {
  rolloutId: string;
  input: unknown;
  spanId?: string;
  succeeded?: boolean;
}

describe("durability", () => {
  it("a SQLite store server SIGKILLed mid-burst keeps every write it acknowledged", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-durable-"));
    const db = `sqlite:${join(dir, "agl.db")}`;
    const first = await spawnStoreServer(["--db", db]);
    let second: Awaited<ReturnType<typeof spawnStoreServer>> | undefined;
    try {
      const client = new LightningStoreClient({ url: first.url, retryDelaysMs: [], timeoutMs: 5000 });
      const acked: Acked[] = [];
      let stop = false;
      // Eight writers: start a rollout, add a span, finish the attempt; remember only what was acknowledged.
      const writer = async (w: number) => {
        for (let i = 0; !stop; i++) {
          try {
            const input = { w, i };
            const started = await client.startRollout({ input });
            const entry: Acked = { rolloutId: started.rollout_id, input };
            acked.push(entry);
            const span = await client.addSpan({
              rollout_id: started.rollout_id,
              attempt_id: started.attempt.attempt_id,
              sequence_id: 1,
              trace_id: "ab".repeat(16),
              span_id: `${w}`.padStart(4, "0") + `${i}`.padStart(12, "0"),
              name: "work",
            });
            entry.spanId = span!.span_id;
            await client.updateAttempt(started.rollout_id, started.attempt.attempt_id, {
              status: "succeeded",
            });
            entry.succeeded = true;
          } catch {
            return;
          }
        }
      };
      const writers = Array.from({ length: 8 }, (_, w) => writer(w));
      while (acked.length < 400) await new Promise((r) => setTimeout(r, 10));
      first.proc.kill("SIGKILL");
      expect(await first.exited).toBe("SIGKILL");
      stop = true;
      await Promise.all(writers);
      expect(acked.length).toBeGreaterThanOrEqual(400);

      second = await spawnStoreServer(["--db", db]);
      const after = new LightningStoreClient({ url: second.url, retryDelaysMs: [] });
      const all = await after.queryRollouts({ limit: -1 });
      const stored = new Map(all.items.map((r) => [r.rollout_id, r]));
      for (const a of acked) {
        const r = stored.get(a.rolloutId);
        expect(r, `acknowledged rollout ${a.rolloutId} lost`).toBeDefined();
        expect(r!.input).toEqual(a.input);
        if (a.succeeded) expect(r!.status).toBe("succeeded");
      }
      const withSpans = acked.filter((a) => a.spanId);
      for (const a of withSpans) {
        const spans = await after.querySpans(a.rolloutId);
        expect(spans.items.map((s) => s.span_id)).toContain(a.spanId);
      }
      // The restarted server keeps working on the same database.
      const fresh = await after.enqueueRollout({ input: "after restart" });
      expect((await after.getRolloutById(fresh.rollout_id))?.status).toBe("queuing");
    } finally {
      if (first.proc.exitCode === null && first.proc.signalCode === null) first.proc.kill("SIGKILL");
      if (second) {
        second.proc.kill("SIGTERM");
        expect(await second.exited).toBe(0);
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
