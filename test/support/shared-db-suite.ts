/**
 * Tests for durable stores that several instances (in this process and in child processes) share:
 * claims are never doubled, the watchdog applies each verdict exactly once and misses none, waiters
 * wake on changes made by another instance, and data survives close/reopen.
 */
import type { AttemptedRollout, LightningStore } from "@agl/core";
import { beforeEach, expect, it } from "vitest";
import { spawnStoreProcess } from "./processes.js";

export interface SharedDbTarget {
  /** Point at a fresh, empty database (called before each test). */
  reset(): Promise<void>;
  /** A new store instance on the shared database. */
  open(options?: { watchdog?: boolean; watchdogMaxSleepMs?: number }): Promise<LightningStore>;
  /** The URI child processes open (with `env`). */
  uri: () => string;
  env?: () => Record<string, string>;
}

const verdictsOf = async (store: LightningStore) => Number((await store.statistics()).watchdog_verdicts);

export function sharedDbTests(target: SharedDbTarget): void {
  beforeEach(() => target.reset());

  it("two instances dequeue concurrently without double claims", async () => {
    const a = await target.open();
    const b = await target.open();
    try {
      const queued = await a.enqueueManyRollouts(Array.from({ length: 60 }, (_, i) => ({ input: i })));
      const claims: AttemptedRollout[] = [];
      await Promise.all(
        [a, b, a, b].map(async (store, i) => {
          for (;;) {
            const batch = await store.dequeueManyRollouts({ limit: 4, workerId: `w${i}` });
            if (batch.length === 0) return;
            claims.push(...batch);
          }
        }),
      );
      const ids = claims.map((c) => c.rollout_id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(new Set(ids)).toEqual(new Set(queued.map((r) => r.rollout_id)));
      expect(claims.every((c) => c.attempt.sequence_id === 1)).toBe(true);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("a waiter wakes when another instance finishes the rollout", async () => {
    const a = await target.open();
    const b = await target.open();
    try {
      const r = await a.startRollout({ input: 1 });
      const started = Date.now();
      const waiting = a.waitForRollouts([r.rollout_id], { timeoutSeconds: 10 });
      await new Promise((resolve) => setTimeout(resolve, 50));
      await b.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
      const done = await waiting;
      expect(done.map((x) => x.status)).toEqual(["succeeded"]);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("two instances' watchdogs time each attempt out exactly once", async () => {
    const a = await target.open({ watchdogMaxSleepMs: 50 });
    const b = await target.open({ watchdogMaxSleepMs: 50 });
    try {
      const config = { timeout_seconds: 0.3, max_attempts: 2, retry_condition: ["timeout" as const] };
      // Created through `a` only: `b` learns of the deadlines from the database.
      const started = await Promise.all(
        Array.from({ length: 20 }, (_, i) => a.startRollout({ input: i, config })),
      );
      const ids = started.map((r) => r.rollout_id);
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        const page = await b.queryRollouts({ rolloutIdIn: ids, statusIn: ["requeuing"] });
        if (page.total === ids.length) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      for (const id of ids) {
        const attempts = (await b.queryAttempts(id)).items;
        expect(attempts.map((x) => x.status)).toEqual(["timeout"]);
        expect((await b.getRolloutById(id))?.status).toBe("requeuing");
      }
      expect((await verdictsOf(a)) + (await verdictsOf(b))).toBe(ids.length);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it("data survives close and reopen", async () => {
    const a = await target.open();
    const resources = await a.addResources({
      p: { resource_type: "prompt_template", template: "t {x}", engine: "f-string" },
    });
    const [first, second] = await a.enqueueManyRollouts([
      { input: { n: 1 } },
      { input: { n: 2 }, metadata: { k: "v" } },
    ]);
    const claimed = await a.dequeueRollout({ workerId: "w-reopen" });
    expect(claimed?.rollout_id).toBe(first!.rollout_id);
    const span = {
      rollout_id: claimed!.rollout_id,
      attempt_id: claimed!.attempt.attempt_id,
      sequence_id: await a.getNextSpanSequenceId(claimed!.rollout_id, claimed!.attempt.attempt_id),
      trace_id: "ab".repeat(16),
      span_id: "cd".repeat(8),
      name: "kept",
      attributes: { "a.b": [1, 2] },
      custom_key: { nested: true },
    };
    await a.addSpan(span);
    await a.close();

    const b = await target.open();
    try {
      expect((await b.getLatestResources())?.resources_id).toBe(resources.resources_id);
      const back = await b.getRolloutById(first!.rollout_id);
      expect(back).toMatchObject({
        status: "running",
        input: { n: 1 },
        resources_id: resources.resources_id,
      });
      expect((back as AttemptedRollout).attempt.worker_id).toBe("w-reopen");
      const spans = await b.querySpans(first!.rollout_id);
      expect(spans.items).toHaveLength(1);
      expect(spans.items[0]).toMatchObject({
        name: "kept",
        custom_key: { nested: true },
        attributes: { "a.b": [1, 2] },
      });
      // The sequence counter and the queue continue where they were.
      expect(await b.getNextSpanSequenceId(first!.rollout_id, "any")).toBe(span.sequence_id + 1);
      expect((await b.dequeueRollout())?.rollout_id).toBe(second!.rollout_id);
      expect((await b.getWorkerById("w-reopen"))?.status).toBe("busy");
    } finally {
      await b.close();
    }
  });

  it("several processes claim from one database: every rollout exactly once", async () => {
    const setup = await target.open();
    const queued = await setup.enqueueManyRollouts(Array.from({ length: 150 }, (_, i) => ({ input: i })));
    const children = [0, 1, 2].map(() => spawnStoreProcess("claim", target.uri(), target.env?.()));
    try {
      await Promise.all(children.map((c) => c.ready));
      for (const c of children) c.child.stdin!.end("go\n");
      const results = (await Promise.all(children.map((c) => c.result))) as Array<{ claimed: string[] }>;
      const all = results.flatMap((r) => r.claimed);
      expect(all.length).toBe(queued.length);
      expect(new Set(all)).toEqual(new Set(queued.map((r) => r.rollout_id)));
      const page = await setup.queryRollouts({ statusIn: ["succeeded"] });
      expect(page.total).toBe(queued.length);
      for (const r of page.items) expect((r as AttemptedRollout).attempt.sequence_id).toBe(1);
    } finally {
      for (const c of children) c.child.kill();
      await setup.close();
    }
  }, 60_000);

  it("watchdogs in several processes time each attempt out exactly once and miss none", async () => {
    const local = await target.open({ watchdog: false });
    const children = [0, 1].map(() => spawnStoreProcess("watchdog", target.uri(), target.env?.()));
    try {
      await Promise.all(children.map((c) => c.ready));
      const config = { unresponsive_seconds: 0.3 };
      const started = await Promise.all(
        Array.from({ length: 20 }, (_, i) => local.startRollout({ input: i, config })),
      );
      const ids = started.map((r) => r.rollout_id);
      // Stay off the store meanwhile: a call on `local` would apply due verdicts itself.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline) {
        const finished = await local.queryRollouts({ rolloutIdIn: ids, statusIn: ["failed"] });
        if (finished.total === ids.length) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      for (const c of children) c.child.stdin!.end();
      const counts = (await Promise.all(children.map((c) => c.result))) as Array<{ verdicts: number }>;
      const byChildren = counts.reduce((n, c) => n + c.verdicts, 0);
      expect(byChildren).toBeGreaterThan(0);
      expect(byChildren + (await verdictsOf(local))).toBe(ids.length);
      for (const id of ids) expect((await local.getLatestAttempt(id))?.status).toBe("unresponsive");
    } finally {
      for (const c of children) c.child.kill();
      await local.close();
    }
  }, 60_000);
}
