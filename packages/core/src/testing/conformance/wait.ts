import { describe, expect, it } from "vitest";
import type { StoreFactory } from "../helpers.js";
import { sleep, withStore } from "../helpers.js";

export function waitTests(factory: StoreFactory, scale: number): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn), 15_000 * scale);
  const s = (seconds: number) => seconds * scale;

  describe("waitForRollouts", () => {
    test("timeout 0 checks once and returns the finished rollouts only", async (store) => {
      const done = await store.startRollout({ input: 1 });
      await store.updateAttempt(done.rollout_id, "latest", { status: "succeeded" });
      const open = await store.enqueueRollout({ input: 2 });
      const started = Date.now();
      const result = await store.waitForRollouts([open.rollout_id, done.rollout_id], { timeoutSeconds: 0 });
      expect(Date.now() - started).toBeLessThan(s(1) * 1000);
      expect(result.map((r) => r.rollout_id)).toEqual([done.rollout_id]);
      expect(result[0]!.status).toBe("succeeded");
      expect(await store.waitForRollouts([], { timeoutSeconds: 0 })).toEqual([]);
    });

    test("timeout null waits until completion and wakes promptly", async (store) => {
      const r = await store.startRollout({ input: 1 });
      let finishedAt = 0;
      const finisher = (async () => {
        await sleep(s(0.2) * 1000);
        await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
        finishedAt = Date.now();
      })();
      const result = await store.waitForRollouts([r.rollout_id], { timeoutSeconds: null });
      const wokeAt = Date.now();
      await finisher;
      expect(result.map((x) => x.status)).toEqual(["succeeded"]);
      expect(wokeAt - finishedAt).toBeLessThan(s(1) * 1000);
    });

    test("a finite timeout returns what finished by the deadline (partial results)", async (store) => {
      const a = await store.startRollout({ input: "a" });
      const b = await store.startRollout({ input: "b" });
      setTimeout(
        () => void store.updateRollout(a.rollout_id, { status: "cancelled" }).catch(() => {}),
        s(0.1) * 1000,
      );
      const started = Date.now();
      const result = await store.waitForRollouts([a.rollout_id, b.rollout_id], { timeoutSeconds: s(0.5) });
      const elapsed = Date.now() - started;
      expect(result.map((r) => r.rollout_id)).toEqual([a.rollout_id]);
      expect(result[0]!.status).toBe("cancelled");
      expect(elapsed).toBeGreaterThanOrEqual(s(0.4) * 1000);
      expect(elapsed).toBeLessThan(s(3) * 1000);
    });

    test("a finite timeout with nothing finished returns an empty list", async (store) => {
      const r = await store.enqueueRollout({ input: 1 });
      const started = Date.now();
      expect(await store.waitForRollouts([r.rollout_id], { timeoutSeconds: s(0.3) })).toEqual([]);
      expect(Date.now() - started).toBeGreaterThanOrEqual(s(0.25) * 1000);
    });

    test("unknown ids are absent and do not make the call wait", async (store) => {
      const started = Date.now();
      expect(await store.waitForRollouts(["ro-000000000000"], { timeoutSeconds: s(10) })).toEqual([]);
      const done = await store.startRollout({ input: 1 });
      await store.updateAttempt(done.rollout_id, "latest", { status: "failed" });
      const result = await store.waitForRollouts(["ro-000000000000", done.rollout_id], {
        timeoutSeconds: s(10),
      });
      expect(result.map((r) => r.rollout_id)).toEqual([done.rollout_id]);
      expect(Date.now() - started).toBeLessThan(s(2) * 1000);
    });

    test("concurrent waiters on overlapping rollouts all wake", async (store) => {
      const a = await store.startRollout({ input: "a" });
      const b = await store.startRollout({ input: "b" });
      const waits = [
        store.waitForRollouts([a.rollout_id], { timeoutSeconds: s(10) }),
        store.waitForRollouts([a.rollout_id, b.rollout_id], { timeoutSeconds: s(10) }),
        store.waitForRollouts([b.rollout_id], { timeoutSeconds: null }),
        store.waitForRollouts([a.rollout_id], { timeoutSeconds: null }),
      ];
      await sleep(s(0.1) * 1000);
      const started = Date.now();
      await store.updateAttempt(a.rollout_id, "latest", { status: "succeeded" });
      await store.updateAttempt(b.rollout_id, "latest", { status: "failed" });
      const results = await Promise.all(waits);
      expect(Date.now() - started).toBeLessThan(s(3) * 1000);
      expect(results.map((r) => r.map((x) => x.rollout_id))).toEqual([
        [a.rollout_id],
        [a.rollout_id, b.rollout_id],
        [b.rollout_id],
        [a.rollout_id],
      ]);
    });
  });
}
