import { describe, expect, it } from "vitest";
import { NotFoundError } from "../../errors.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, withStore } from "../helpers.js";

export function queueTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("queue", () => {
    test("enqueue creates a queuing rollout with defaults", async (store) => {
      const r = await store.enqueueRollout({ input: { question: "2+2" } });
      expect(r.rollout_id).toMatch(/^ro-[0-9a-f]{12}$/);
      expect(r.status).toBe("queuing");
      expect(r.input).toEqual({ question: "2+2" });
      expect(r.metadata).toEqual({});
      expect(r.mode).toBeNull();
      expect(r.end_time).toBeNull();
      expect(r.config).toEqual({
        timeout_seconds: null,
        unresponsive_seconds: null,
        max_attempts: 1,
        retry_condition: [],
      });
      expect(r.start_time).toBeGreaterThan(1e9);
      expect(await store.getLatestAttempt(r.rollout_id)).toBeNull();
    });

    test("dequeue is FIFO and creates attempt 1 in preparing", async (store) => {
      const a = await store.enqueueRollout({ input: 1 });
      const [b, c] = await store.enqueueManyRollouts([{ input: 2 }, { input: 3, mode: "val" }]);
      expect(c!.mode).toBe("val");
      const order: string[] = [];
      for (let i = 0; i < 3; i++) {
        const claimed = await store.dequeueRollout();
        expect(claimed).not.toBeNull();
        expect(claimed!.status).toBe("preparing");
        expect(claimed!.attempt.sequence_id).toBe(1);
        expect(claimed!.attempt.status).toBe("preparing");
        expect(claimed!.attempt.attempt_id).toMatch(/^at-[0-9a-f]{8}$/);
        expect(claimed!.attempt.rollout_id).toBe(claimed!.rollout_id);
        order.push(claimed!.rollout_id);
      }
      expect(order).toEqual([a.rollout_id, b!.rollout_id, c!.rollout_id]);
    });

    test("an empty dequeue returns null; dequeueMany honours its limit", async (store) => {
      expect(await store.dequeueRollout()).toBeNull();
      expect(await store.dequeueManyRollouts({ limit: 3 })).toEqual([]);
      const rs = await store.enqueueManyRollouts([{ input: 1 }, { input: 2 }, { input: 3 }]);
      expect(await store.dequeueManyRollouts({ limit: 0 })).toEqual([]);
      const two = await store.dequeueManyRollouts({ limit: 2 });
      expect(two.map((r) => r.rollout_id)).toEqual([rs[0]!.rollout_id, rs[1]!.rollout_id]);
      const rest = await store.dequeueManyRollouts({ limit: 5 });
      expect(rest.map((r) => r.rollout_id)).toEqual([rs[2]!.rollout_id]);
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("stale queue entries are skipped", async (store) => {
      const a = await store.enqueueRollout({ input: "a" });
      const b = await store.enqueueRollout({ input: "b" });
      await store.updateRollout(a.rollout_id, { status: "cancelled" });
      const claimed = await store.dequeueRollout();
      expect(claimed?.rollout_id).toBe(b.rollout_id);
      expect(await store.dequeueRollout()).toBeNull();
      // A manual attempt on a queued rollout also makes its queue entry stale.
      const c = await store.enqueueRollout({ input: "c" });
      await store.startAttempt(c.rollout_id);
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("a rollout already in the queue is not queued twice", async (store) => {
      const a = await store.enqueueRollout({ input: "a" });
      await store.updateRollout(a.rollout_id, { status: "requeuing" });
      await store.updateRollout(a.rollout_id, { status: "queuing" });
      expect((await store.dequeueRollout())?.rollout_id).toBe(a.rollout_id);
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("a failed attempt with retries left requeues; the next dequeue makes attempt 2", async (store) => {
      const r = await store.enqueueRollout({
        input: "x",
        config: { max_attempts: 2, retry_condition: ["failed"] },
      });
      const first = await store.dequeueRollout({ workerId: "w-1" });
      await store.updateAttempt(r.rollout_id, first!.attempt.attempt_id, { status: "failed" });
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("requeuing");
      const second = await store.dequeueRollout({ workerId: "w-2" });
      expect(second?.rollout_id).toBe(r.rollout_id);
      expect(second!.attempt.sequence_id).toBe(2);
      expect(second!.attempt.status).toBe("preparing");
      expect(second!.attempt.worker_id).toBe("w-2");
      expect(second!.status).toBe("preparing");
      const attempts = await store.queryAttempts(r.rollout_id);
      expect(attempts.total).toBe(2);
      expect(attempts.items.map((a) => a.status)).toEqual(["failed", "preparing"]);
    });

    test("startRollout creates a preparing rollout with attempt 1 and never queues it", async (store) => {
      const started = await store.startRollout({ input: { a: 1 }, mode: "train", worker_id: "w-9" });
      expect(started.status).toBe("preparing");
      expect(started.mode).toBe("train");
      expect(started.attempt.sequence_id).toBe(1);
      expect(started.attempt.status).toBe("preparing");
      expect(started.attempt.worker_id).toBe("w-9");
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("startAttempt ignores max_attempts and works from a terminal rollout", async (store) => {
      const r = await store.startRollout({
        input: 1,
        config: { max_attempts: 1, retry_condition: ["failed"] },
      });
      await store.updateAttempt(r.rollout_id, "latest", { status: "failed" });
      const failed = await store.getRolloutById(r.rollout_id);
      expect(failed?.status).toBe("failed");
      expect(failed?.end_time).not.toBeNull();
      const retried = await store.startAttempt(r.rollout_id, { workerId: "w-3" });
      expect(retried.attempt.sequence_id).toBe(2);
      expect(retried.attempt.status).toBe("preparing");
      expect(retried.attempt.worker_id).toBe("w-3");
      expect(retried.status).toBe("preparing");
      expect(retried.end_time).toBeNull();
      const third = await store.startAttempt(r.rollout_id);
      expect(third.attempt.sequence_id).toBe(3);
      expect((await store.getLatestAttempt(r.rollout_id))?.attempt_id).toBe(third.attempt.attempt_id);
    });

    test("concurrent dequeues claim each rollout exactly once", async (store) => {
      const queued = await store.enqueueManyRollouts(Array.from({ length: 30 }, (_, i) => ({ input: i })));
      const claims = await Promise.all([
        ...Array.from({ length: 25 }, (_, i) => store.dequeueRollout({ workerId: `w-${i % 5}` })),
        store.dequeueManyRollouts({ limit: 4 }),
        store.dequeueManyRollouts({ limit: 4 }),
      ]);
      const ids = claims
        .flatMap((c) => (c === null ? [] : Array.isArray(c) ? c : [c]))
        .map((c) => c.rollout_id);
      expect(ids.length).toBe(30);
      expect(new Set(ids)).toEqual(new Set(queued.map((r) => r.rollout_id)));
      const attempts = await Promise.all(queued.map((r) => store.queryAttempts(r.rollout_id)));
      expect(attempts.every((a) => a.total === 1)).toBe(true);
    });

    test("concurrent sequence allocations are unique per rollout", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const seqs = await Promise.all(
        Array.from({ length: 40 }, () => store.getNextSpanSequenceId(r.rollout_id, r.attempt.attempt_id)),
      );
      expect([...seqs].sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    });

    test("startAttempt on an unknown rollout raises NotFoundError", async (store) => {
      await expectError(store.startAttempt("ro-000000000000"), NotFoundError);
    });
  });
}
