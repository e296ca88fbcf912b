import { describe, expect, it } from "vitest";
import { IllegalTransitionError, NotFoundError } from "../../errors.js";
import type { StoreFactory } from "../helpers.js";
import { attemptOf, expectError, makeSpan, nowSec, withStore } from "../helpers.js";

/** Status propagation between spans, attempts and rollouts (no timers involved). */
export function statusTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("status propagation", () => {
    test("a span takes a preparing attempt and rollout to running and records a heartbeat", async (store) => {
      await store.enqueueRollout({ input: 1 });
      const claimed = await store.dequeueRollout();
      const before = nowSec();
      await store.addSpan(makeSpan(claimed!.attempt, 1));
      const rollout = await store.getRolloutById(claimed!.rollout_id);
      expect(rollout?.status).toBe("running");
      const attempt = attemptOf(rollout);
      expect(attempt.status).toBe("running");
      expect(attempt.last_heartbeat_time).toBeGreaterThanOrEqual(before - 1);
    });

    test("a span revives an unresponsive attempt and takes a requeuing rollout to running", async (store) => {
      await store.enqueueRollout({
        input: 1,
        config: { max_attempts: 3, retry_condition: ["unresponsive"] },
      });
      const claimed = await store.dequeueRollout();
      const rid = claimed!.rollout_id;
      await store.updateAttempt(rid, "latest", { status: "unresponsive" });
      expect((await store.getRolloutById(rid))?.status).toBe("requeuing");
      await store.addSpan(makeSpan(claimed!.attempt, 1));
      const rollout = await store.getRolloutById(rid);
      expect(rollout?.status).toBe("running");
      expect(attemptOf(rollout).status).toBe("running");
      expect(attemptOf(rollout).attempt_id).toBe(claimed!.attempt.attempt_id);
      // Its queue entry is now stale.
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("a span leaves a timed-out attempt alone but refreshes its heartbeat", async (store) => {
      const r = await store.startRollout({ input: 1 });
      await store.updateAttempt(r.rollout_id, "latest", { status: "timeout" });
      const before = (await store.getLatestAttempt(r.rollout_id))!;
      expect(before.status).toBe("timeout");
      expect(before.last_heartbeat_time).toBeNull();
      await store.addSpan(makeSpan(r.attempt, 1));
      const after = (await store.getLatestAttempt(r.rollout_id))!;
      expect(after.status).toBe("timeout");
      expect(after.last_heartbeat_time).not.toBeNull();
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("failed");
    });

    test("a heartbeat via updateAttempt counts as liveness and revives an unresponsive attempt", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const t = nowSec();
      const hb = await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { last_heartbeat_time: t });
      expect(hb.last_heartbeat_time).toBeCloseTo(t, 3);
      expect(hb.status).toBe("running");
      await store.updateAttempt(r.rollout_id, "latest", { status: "unresponsive" });
      const revived = await store.updateAttempt(r.rollout_id, "latest", { last_heartbeat_time: nowSec() });
      expect(revived.status).toBe("running");
    });

    test("only the latest attempt propagates to the rollout", async (store) => {
      const r = await store.startRollout({ input: 1 });
      const second = await store.startAttempt(r.rollout_id);
      // A span or a status from the older attempt changes that attempt only.
      await store.addSpan(makeSpan(r.attempt, 1));
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("preparing");
      await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "failed" });
      let rollout = await store.getRolloutById(r.rollout_id);
      expect(rollout?.status).toBe("preparing");
      expect(attemptOf(rollout).attempt_id).toBe(second.attempt.attempt_id);
      await store.updateAttempt(r.rollout_id, second.attempt.attempt_id, { status: "succeeded" });
      rollout = await store.getRolloutById(r.rollout_id);
      expect(rollout?.status).toBe("succeeded");
      const attempts = await store.queryAttempts(r.rollout_id);
      expect(attempts.items.map((a) => a.status)).toEqual(["failed", "succeeded"]);
    });

    test("running and succeeded are mirrored; 'latest' addresses the newest attempt", async (store) => {
      const r = await store.startRollout({ input: 1 });
      await store.updateAttempt(r.rollout_id, "latest", { status: "running" });
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("running");
      const done = await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
      expect(done.attempt_id).toBe(r.attempt.attempt_id);
      expect(done.end_time).not.toBeNull();
      const rollout = await store.getRolloutById(r.rollout_id);
      expect(rollout?.status).toBe("succeeded");
      expect(rollout?.end_time).not.toBeNull();
    });

    test("a retry needs the status in retry_condition and attempts left", async (store) => {
      const notRetryable = await store.startRollout({
        input: 1,
        config: { max_attempts: 3, retry_condition: ["timeout"] },
      });
      await store.updateAttempt(notRetryable.rollout_id, "latest", { status: "failed" });
      expect((await store.getRolloutById(notRetryable.rollout_id))?.status).toBe("failed");

      const retryable = await store.startRollout({
        input: 2,
        config: { max_attempts: 2, retry_condition: ["failed", "timeout"] },
      });
      await store.updateAttempt(retryable.rollout_id, "latest", { status: "failed" });
      expect((await store.getRolloutById(retryable.rollout_id))?.status).toBe("requeuing");
      const second = await store.dequeueRollout();
      expect(second?.rollout_id).toBe(retryable.rollout_id);
      expect(second!.attempt.sequence_id).toBe(2);
      // seq 2 == max_attempts 2: no more retries.
      await store.updateAttempt(retryable.rollout_id, "latest", { status: "timeout" });
      const final = await store.getRolloutById(retryable.rollout_id);
      expect(final?.status).toBe("failed");
      expect(final?.end_time).not.toBeNull();
    });

    test("illegal attempt transitions raise IllegalTransitionError and change nothing", async (store) => {
      const r = await store.startRollout({ input: 1 });
      await store.updateAttempt(r.rollout_id, "latest", { status: "succeeded" });
      const err = await expectError<IllegalTransitionError>(
        store.updateAttempt(r.rollout_id, "latest", { status: "running" }),
        IllegalTransitionError,
      );
      expect(err.from).toBe("succeeded");
      expect(err.to).toBe("running");
      await expectError(
        store.updateAttempt(r.rollout_id, "latest", { status: "failed" }),
        IllegalTransitionError,
      );
      expect((await store.getLatestAttempt(r.rollout_id))?.status).toBe("succeeded");
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("succeeded");
    });

    test("illegal rollout transitions raise IllegalTransitionError", async (store) => {
      const q = await store.enqueueRollout({ input: 1 });
      await expectError(store.updateRollout(q.rollout_id, { status: "succeeded" }), IllegalTransitionError);
      expect((await store.getRolloutById(q.rollout_id))?.status).toBe("queuing");
      const s = await store.startRollout({ input: 2 });
      await store.updateAttempt(s.rollout_id, "latest", { status: "succeeded" });
      await expectError(store.updateRollout(s.rollout_id, { status: "running" }), IllegalTransitionError);
      await expectError(store.updateRollout(s.rollout_id, { status: "failed" }), IllegalTransitionError);
      expect((await store.getRolloutById(s.rollout_id))?.status).toBe("succeeded");
    });

    test("end_time is set on terminal statuses and cleared when a rollout is queued again", async (store) => {
      const r = await store.enqueueRollout({ input: 1 });
      const cancelled = await store.updateRollout(r.rollout_id, { status: "cancelled" });
      expect(cancelled.status).toBe("cancelled");
      expect(cancelled.end_time).not.toBeNull();
      expect(cancelled.end_time!).toBeGreaterThanOrEqual(cancelled.start_time);
      const again = await store.updateRollout(r.rollout_id, { status: "queuing" });
      expect(again.end_time).toBeNull();
      expect((await store.dequeueRollout())?.rollout_id).toBe(r.rollout_id);
      const running = await store.getLatestAttempt(r.rollout_id);
      expect(running?.end_time).toBeNull();
    });

    test("updateRollout sets present fields (null included) and leaves absent ones", async (store) => {
      const r = await store.enqueueRollout({
        input: { a: 1 },
        mode: "train",
        resources_id: "rs-x",
        metadata: { k: 1 },
      });
      const u1 = await store.updateRollout(r.rollout_id, { mode: null, metadata: { k: 2 } });
      expect(u1.mode).toBeNull();
      expect(u1.metadata).toEqual({ k: 2 });
      expect(u1.resources_id).toBe("rs-x");
      expect(u1.input).toEqual({ a: 1 });
      const u2 = await store.updateRollout(r.rollout_id, {
        input: { a: 2 },
        resources_id: null,
        config: { max_attempts: 4, retry_condition: ["failed"] },
      });
      expect(u2.input).toEqual({ a: 2 });
      expect(u2.resources_id).toBeNull();
      expect(u2.mode).toBeNull();
      expect(u2.config.max_attempts).toBe(4);
      expect(u2.status).toBe("queuing");
      expect((await store.getRolloutById(r.rollout_id))?.config.retry_condition).toEqual(["failed"]);
    });

    test("unknown ids raise NotFoundError on mutations and give null on reads", async (store) => {
      await expectError(store.updateRollout("ro-ffffffffffff", { status: "cancelled" }), NotFoundError);
      await expectError(
        store.updateAttempt("ro-ffffffffffff", "latest", { status: "failed" }),
        NotFoundError,
      );
      const r = await store.enqueueRollout({ input: 1 });
      await expectError(store.updateAttempt(r.rollout_id, "latest", { status: "failed" }), NotFoundError);
      await expectError(
        store.updateAttempt(r.rollout_id, "at-00000000", { status: "failed" }),
        NotFoundError,
      );
      expect(await store.getRolloutById("ro-ffffffffffff")).toBeNull();
      expect(await store.getLatestAttempt("ro-ffffffffffff")).toBeNull();
      expect(await store.getResourcesById("rs-ffffffffffff")).toBeNull();
      expect(await store.getWorkerById("nobody")).toBeNull();
      const none = await store.queryAttempts("ro-ffffffffffff");
      expect(none).toEqual({ items: [], limit: -1, offset: 0, total: 0 });
    });
  });
}
