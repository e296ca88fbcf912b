import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { AbortedError } from "../../errors.js";
import type { LightningStore } from "../../store/store.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, sleep, withStore } from "../helpers.js";

/** The store's `pending_waiters` statistic (the server's store's, through a client), null when not reported. */
async function pendingWaiters(store: LightningStore): Promise<number | null> {
  const value = (await store.statistics()).pending_waiters;
  return typeof value === "number" ? value : null;
}

/** Poll `probe` until it returns true or `ms` pass; the last value decides. */
async function eventually(probe: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await probe()) return true;
    await sleep(20);
  }
  return probe();
}

const abortListeners = (signal: AbortSignal): number => getEventListeners(signal, "abort").length;

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

  describe("waitForRollouts cancellation", () => {
    test("aborting rejects the wait promptly with AbortedError; other waiters are unaffected", async (store) => {
      const a = await store.startRollout({ input: "a" });
      const b = await store.startRollout({ input: "b" });
      const controller = new AbortController();
      const cancelled = expectError<AbortedError>(
        store.waitForRollouts([a.rollout_id, b.rollout_id], {
          timeoutSeconds: null,
          signal: controller.signal,
        }),
        AbortedError,
      );
      const other = new AbortController();
      const untouched = [
        store.waitForRollouts([a.rollout_id], { timeoutSeconds: s(10) }),
        store.waitForRollouts([a.rollout_id, b.rollout_id], { timeoutSeconds: null, signal: other.signal }),
      ];
      await sleep(s(0.2) * 1000);
      const reason = new Error("stop waiting");
      const started = Date.now();
      controller.abort(reason);
      const error = await cancelled;
      expect(Date.now() - started).toBeLessThan(s(1) * 1000);
      expect(error.name).toBe("AbortError");
      expect(error.cause).toBe(reason);
      await store.updateAttempt(a.rollout_id, "latest", { status: "succeeded" });
      await store.updateAttempt(b.rollout_id, "latest", { status: "failed" });
      const results = await Promise.all(untouched);
      expect(results.map((r) => r.map((x) => x.rollout_id))).toEqual([
        [a.rollout_id],
        [a.rollout_id, b.rollout_id],
      ]);
    });

    test("an already-aborted signal rejects at once, before anything is read", async (store) => {
      const done = await store.startRollout({ input: 1 });
      await store.updateAttempt(done.rollout_id, "latest", { status: "succeeded" });
      const open = await store.startRollout({ input: 2 });
      const controller = new AbortController();
      const reason = new Error("already gone");
      controller.abort(reason);
      for (const timeoutSeconds of [0, s(10), null]) {
        const started = Date.now();
        const error = await expectError<AbortedError>(
          store.waitForRollouts([done.rollout_id, open.rollout_id], {
            timeoutSeconds,
            signal: controller.signal,
          }),
          AbortedError,
        );
        expect(Date.now() - started).toBeLessThan(s(1) * 1000);
        expect(error.cause).toBe(reason);
      }
    });

    test("a cancelled wait leaves nothing behind: later completions are fine, waiters drop to zero", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const before = await pendingWaiters(store);
      const controller = new AbortController();
      const cancelled = expectError(
        store.waitForRollouts([r.rollout_id], { timeoutSeconds: null, signal: controller.signal }),
        AbortedError,
      );
      // A client's wait reaches the server's store a little later.
      if (before !== null)
        expect(await eventually(async () => (await pendingWaiters(store)) === before + 1, s(2) * 1000)).toBe(
          true,
        );
      controller.abort();
      await cancelled;
      await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
      const result = await store.waitForRollouts([r.rollout_id], { timeoutSeconds: s(1) });
      expect(result.map((x) => x.status)).toEqual(["succeeded"]);
      // Through a client the server notices the dropped request asynchronously.
      if (before !== null)
        expect(await eventually(async () => (await pendingWaiters(store)) === before, s(2) * 1000)).toBe(
          true,
        );
    });

    test("a signal reused across waits that end normally collects no abort listeners", async (store) => {
      const open = await store.startRollout({ input: 1 });
      const done = await store.startRollout({ input: 2 });
      await store.updateAttempt(done.rollout_id, "latest", { status: "succeeded" });
      const controller = new AbortController();
      for (let i = 0; i < 3; i++) {
        // One wait that times out, one that is answered at once, one woken by a completion.
        expect(
          await store.waitForRollouts([open.rollout_id], {
            timeoutSeconds: s(0.05),
            signal: controller.signal,
          }),
        ).toEqual([]);
        await store.waitForRollouts([done.rollout_id], { timeoutSeconds: s(5), signal: controller.signal });
      }
      const waking = store.waitForRollouts([open.rollout_id], {
        timeoutSeconds: s(5),
        signal: controller.signal,
      });
      await sleep(s(0.1) * 1000);
      await store.updateAttempt(open.rollout_id, "latest", { status: "succeeded" });
      expect((await waking).map((x) => x.rollout_id)).toEqual([open.rollout_id]);
      // An HTTP client lets go of the signal when the response body closes, a tick after it resolves.
      expect(await eventually(() => abortListeners(controller.signal) === 0, 1000)).toBe(true);
    });
  });
}
