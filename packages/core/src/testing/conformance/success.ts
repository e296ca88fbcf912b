import { describe, expect, it } from "vitest";
import { IllegalTransitionError } from "../../errors.js";
import type { LightningStore } from "../../store/store.js";
import type { StoreFactory } from "../helpers.js";
import { expectError, makeSpan, withStore } from "../helpers.js";

const RETRY_UNRESPONSIVE = { max_attempts: 3, retry_condition: ["unresponsive" as const] };

async function statuses(store: LightningStore, rid: string): Promise<string[]> {
  return (await store.queryAttempts(rid)).items.map((a) => a.status);
}

/**
 * At most one succeeded attempt per rollout, and a late success wins (state-machine.ts settleSuccess):
 * an attempt marked unresponsive and retried that then succeeds finishes its rollout, the retry is
 * superseded, and of two attempts reporting success at once exactly one is accepted.
 */
export function successTests(factory: StoreFactory): void {
  const test = (title: string, fn: Parameters<typeof withStore>[1]) =>
    it(title, () => withStore(factory, fn));

  describe("one success per rollout, late success wins", () => {
    test("an unresponsive attempt that succeeds before its retry starts finishes the requeuing rollout", async (store) => {
      await store.enqueueRollout({ input: 1, config: RETRY_UNRESPONSIVE });
      const first = (await store.dequeueRollout({ workerId: "w1" }))!;
      const rid = first.rollout_id;
      await store.updateAttempt(rid, "latest", { status: "unresponsive" });
      expect((await store.getRolloutById(rid))?.status).toBe("requeuing");
      await store.updateAttempt(rid, first.attempt.attempt_id, { status: "succeeded" });
      const rollout = await store.getRolloutById(rid);
      expect(rollout?.status).toBe("succeeded");
      expect(rollout?.end_time).not.toBeNull();
      // Its queue entry is stale: the rollout never runs again.
      expect(await store.dequeueRollout({ workerId: "w2" })).toBeNull();
      expect(await statuses(store, rid)).toEqual(["succeeded"]);
      const [waited] = await store.waitForRollouts([rid], { timeoutSeconds: 0 });
      expect(waited?.status).toBe("succeeded");
    });

    test("an older attempt's late success wins: the retry is superseded and its own success refused", async (store) => {
      await store.enqueueRollout({ input: 1, config: RETRY_UNRESPONSIVE });
      const first = (await store.dequeueRollout({ workerId: "w1" }))!;
      const rid = first.rollout_id;
      await store.updateAttempt(rid, "latest", { status: "unresponsive" });
      const second = (await store.dequeueRollout({ workerId: "w2" }))!;
      expect(second.attempt.sequence_id).toBe(2);
      await store.addSpan(makeSpan(second.attempt, 1));
      await store.updateAttempt(rid, first.attempt.attempt_id, { status: "succeeded" });
      expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
      const superseded = (await store.getLatestAttempt(rid))!;
      expect(superseded.attempt_id).toBe(second.attempt.attempt_id);
      expect(superseded.status).toBe("failed");
      expect(superseded.end_time).not.toBeNull();
      expect(superseded.metadata).toMatchObject({ error: { type: "Superseded" } });
      const refused = await expectError<IllegalTransitionError>(
        store.updateAttempt(rid, second.attempt.attempt_id, { status: "succeeded" }),
        IllegalTransitionError,
      );
      expect([refused.from, refused.to]).toEqual(["failed", "succeeded"]);
      // The retry's worker reporting failure, spans or heartbeats change nothing.
      await store.updateAttempt(rid, second.attempt.attempt_id, { status: "failed" });
      await store.addSpan(makeSpan(second.attempt, 2));
      expect(await statuses(store, rid)).toEqual(["succeeded", "failed"]);
      expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
      expect(await store.dequeueRollout()).toBeNull();
      // Resending the accepted success (a client retry) is fine.
      await store.updateAttempt(rid, first.attempt.attempt_id, { status: "succeeded" });
    });

    test("once the retry succeeded, the older attempt's late success is refused and nothing changes", async (store) => {
      await store.enqueueRollout({ input: 1, config: RETRY_UNRESPONSIVE });
      const first = (await store.dequeueRollout())!;
      const rid = first.rollout_id;
      await store.updateAttempt(rid, "latest", { status: "unresponsive" });
      const second = (await store.dequeueRollout())!;
      await store.updateAttempt(rid, second.attempt.attempt_id, { status: "succeeded" });
      const refused = await expectError<IllegalTransitionError>(
        store.updateAttempt(rid, first.attempt.attempt_id, { status: "succeeded" }),
        IllegalTransitionError,
      );
      expect([refused.from, refused.to]).toEqual(["unresponsive", "succeeded"]);
      expect(refused.message).toContain("already succeeded");
      expect(await statuses(store, rid)).toEqual(["unresponsive", "succeeded"]);
      expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
    });

    test("a late success does not revive a cancelled or failed rollout, and a cancelled one is not retried", async (store) => {
      const r = await store.startRollout({ input: 1, config: RETRY_UNRESPONSIVE });
      await store.updateAttempt(r.rollout_id, "latest", { status: "unresponsive" });
      await store.updateRollout(r.rollout_id, { status: "cancelled" });
      await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
      expect((await store.getRolloutById(r.rollout_id))?.status).toBe("cancelled");
      expect(await statuses(store, r.rollout_id)).toEqual(["succeeded"]);
      expect(await store.dequeueRollout()).toBeNull();
    });

    test("two attempts reporting success at once: exactly one is accepted", async (store) => {
      const rounds = 8;
      const outcomes: Array<Array<"ok" | "refused">> = [];
      for (let i = 0; i < rounds; i++) {
        await store.enqueueRollout({ input: i, config: RETRY_UNRESPONSIVE });
        const first = (await store.dequeueRollout({ workerId: "w1" }))!;
        const rid = first.rollout_id;
        await store.updateAttempt(rid, "latest", { status: "unresponsive" });
        const second = (await store.dequeueRollout({ workerId: "w2" }))!;
        await store.addSpan(makeSpan(second.attempt, 1));
        const ends = [first, second].map((a) =>
          store.updateAttempt(rid, a.attempt.attempt_id, { status: "succeeded" }),
        );
        const settled = await Promise.allSettled(i % 2 === 0 ? ends : [...ends].reverse());
        const round = settled.map((s) => {
          if (s.status === "fulfilled") return "ok" as const;
          expect(IllegalTransitionError.isInstance(s.reason)).toBe(true);
          return "refused" as const;
        });
        outcomes.push(round);
        expect(round.filter((o) => o === "ok")).toHaveLength(1);
        const after = await statuses(store, rid);
        expect(after.filter((s) => s === "succeeded")).toHaveLength(1);
        expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
      }
      expect(outcomes).toHaveLength(rounds);
      expect(await store.dequeueRollout()).toBeNull();
    });
    test("spans and heartbeats racing an attempt's success never undo it", async (store) => {
      for (let i = 0; i < 8; i++) {
        const r = await store.startRollout({ input: i, config: RETRY_UNRESPONSIVE });
        const rid = r.rollout_id;
        await store.addSpan(makeSpan(r.attempt, 1));
        await Promise.all([
          store.addSpan(makeSpan(r.attempt, 2)),
          store.updateAttempt(rid, r.attempt.attempt_id, { last_heartbeat_time: Date.now() / 1000 }),
          store.updateAttempt(rid, r.attempt.attempt_id, { status: "succeeded" }),
          store.addManySpans([makeSpan(r.attempt, 3), makeSpan(r.attempt, 4)]),
        ]);
        expect(await statuses(store, rid)).toEqual(["succeeded"]);
        expect((await store.getRolloutById(rid))?.status).toBe("succeeded");
      }
    });
  });
}
