import { describe, expect, it } from "vitest";
import type { StoreFactory } from "../helpers.js";
import { attemptOf, nowSec, sleep, withStore } from "../helpers.js";

/**
 * The watchdog with short real timeouts (no fake timers: the same suite runs against SQL stores and
 * over HTTP). `scale` stretches every duration for slow backends.
 */
export function watchdogTests(factory: StoreFactory, scale: number): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn), 15_000 * scale);
  const s = (seconds: number) => seconds * scale;
  const wait = (seconds: number) => sleep(s(seconds) * 1000);

  describe("watchdog", () => {
    test("a timed-out attempt makes a retryable rollout requeuing, then attempt 2 is dequeued", async (store) => {
      const r = await store.enqueueRollout({
        input: 1,
        config: { timeout_seconds: s(0.3), max_attempts: 2, retry_condition: ["timeout"] },
      });
      const first = await store.dequeueRollout({ workerId: "w-t" });
      expect(first?.rollout_id).toBe(r.rollout_id);
      await wait(0.7);
      const rollout = await store.getRolloutById(r.rollout_id);
      expect(rollout?.status).toBe("requeuing");
      const attempt = attemptOf(rollout);
      expect(attempt.status).toBe("timeout");
      expect(attempt.end_time).not.toBeNull();
      expect((await store.getWorkerById("w-t"))?.status).toBe("unknown");
      const second = await store.dequeueRollout();
      expect(second?.rollout_id).toBe(r.rollout_id);
      expect(second!.attempt.sequence_id).toBe(2);
    });

    test("an unresponsive attempt marks its worker unknown and fails a non-retryable rollout", async (store) => {
      const r = await store.startRollout({
        input: 1,
        worker_id: "w-u",
        config: { unresponsive_seconds: s(0.3) },
      });
      expect((await store.getWorkerById("w-u"))?.status).toBe("busy");
      await wait(0.7);
      const attempt = await store.getLatestAttempt(r.rollout_id);
      expect(attempt?.status).toBe("unresponsive");
      const worker = await store.getWorkerById("w-u");
      expect(worker?.status).toBe("unknown");
      expect(worker?.current_rollout_id).toBeNull();
      expect(worker?.current_attempt_id).toBeNull();
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("failed");
    });

    test("the watchdog is active: an attempt times out while nobody calls the store", async (store) => {
      const r = await store.startRollout({ input: 1, config: { timeout_seconds: s(0.3) } });
      const started = Date.now();
      // The only pending call is this wait; nothing else touches the store until it resolves.
      const done = await store.waitForRollouts([r.rollout_id], { timeoutSeconds: s(8) });
      const elapsed = (Date.now() - started) / 1000;
      expect(done.map((x) => x.rollout_id)).toEqual([r.rollout_id]);
      expect(done[0]!.status).toBe("failed");
      expect(elapsed).toBeLessThan(s(6));
      expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("timeout");
    });

    test("heartbeats keep an attempt alive past unresponsive_seconds", async (store) => {
      const r = await store.startRollout({ input: 1, config: { unresponsive_seconds: s(0.6) } });
      const until = Date.now() + s(1) * 1000;
      while (Date.now() < until) {
        await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { last_heartbeat_time: nowSec() });
        await wait(0.1);
      }
      expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("running");
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("running");
      await wait(1.2);
      expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("unresponsive");
    });

    test("the watchdog only judges the latest attempt of running-like rollouts", async (store) => {
      const a = await store.startRollout({
        input: 1,
        config: {
          unresponsive_seconds: s(0.2),
          timeout_seconds: s(0.9),
          max_attempts: 3,
          retry_condition: ["unresponsive"],
        },
      });
      const b = await store.startRollout({ input: 2, config: { timeout_seconds: s(0.3) } });
      await store.updateAttempt(b.rollout_id, "latest", { status: "succeeded" });
      await wait(1.3);
      // Unresponsive made `a` requeuing; a queued rollout is not timed out afterwards.
      expect((await store.getLatestAttempt(a.rollout_id))?.status).toBe("unresponsive");
      expect((await store.getRolloutById(a.rollout_id))?.status).toBe("requeuing");
      expect((await store.getLatestAttempt(b.rollout_id))?.status).toBe("succeeded");
      expect((await store.getRolloutById(b.rollout_id))?.status).toBe("succeeded");
    });
  });
}
