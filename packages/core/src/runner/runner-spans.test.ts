import { afterEach, describe, expect, it } from "vitest";
import { emitMessage } from "../emitters/emit.js";
import { emitReward } from "../emitters/reward.js";
import { findFinalReward } from "../emitters/reward-reader.js";
import { silentLogger } from "../logger.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import type { LightningStore } from "../store/store.js";
import { Runner } from "./runner.js";

let store: InMemoryLightningStore;
afterEach(async () => store?.close());

/** The store with an outage: while `down` is true, the named calls fail as a dropped connection would. */
function withOutage(inner: LightningStore, calls: readonly string[]) {
  const state = { down: false, failed: 0 };
  const proxy = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function") return value;
      if (!calls.includes(String(prop))) return value.bind(target);
      return async (...args: unknown[]) => {
        if (state.down) {
          state.failed++;
          throw new Error(`connect ECONNREFUSED (${String(prop)})`);
        }
        return value.apply(target, args);
      };
    },
  });
  return { store: proxy, state };
}

async function agentRun(
  outageCalls: readonly string[],
  options: { recoverAfterFailures?: number; maxAttempts?: number; storeRetryDelaysMs: number[] },
) {
  store = new InMemoryLightningStore();
  await store.addResources({});
  const outage = withOutage(store, outageCalls);
  const r = await store.enqueueRollout({
    input: "task",
    config: { max_attempts: options.maxAttempts ?? 1, retry_condition: ["failed"] },
  });
  const runner = new Runner({
    store: outage.store,
    agent: async () => {
      emitMessage("working");
      // The store goes away while the agent runs; its spans cannot be written.
      outage.state.down = true;
      emitReward(1);
      if (options.recoverAfterFailures !== undefined) {
        const recoverAt = options.recoverAfterFailures;
        const timer = setInterval(() => {
          if (outage.state.failed >= recoverAt) {
            outage.state.down = false;
            clearInterval(timer);
          }
        }, 1);
      }
    },
    maxRollouts: 1,
    pollIntervalMs: 5,
    logger: silentLogger,
    storeRetryDelaysMs: options.storeRetryDelaysMs,
  });
  const summary = await runner.run();
  outage.state.down = false;
  const rollout = (await store.getRolloutById(r.rollout_id))!;
  const attempts = await store.queryAttempts(r.rollout_id);
  const spans = (await store.querySpans(r.rollout_id)).items;
  return { summary, rollout, attempts, spans };
}

describe("Runner: no success without the attempt's spans", () => {
  it("retries the spans through a store outage and then succeeds with all of them", async () => {
    const { summary, rollout, spans } = await agentRun(["getManySpanSequenceIds", "addManySpans"], {
      recoverAfterFailures: 3,
      storeRetryDelaysMs: [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5],
    });
    expect(summary).toMatchObject({ succeeded: 1, failed: 0 });
    expect(rollout.status).toBe("succeeded");
    expect(spans.map((s) => s.name).sort()).toEqual([
      "agent.rollout",
      "agentlightning.annotation",
      "agentlightning.message",
    ]);
    expect(findFinalReward(spans)).toBe(1);
  });

  it("fails the attempt with a recorded reason when its spans cannot be written", async () => {
    const { summary, rollout, attempts, spans } = await agentRun(["addManySpans"], {
      storeRetryDelaysMs: [0, 0],
    });
    expect(summary).toMatchObject({ succeeded: 0, failed: 1 });
    expect(rollout.status).toBe("failed");
    expect(attempts.items[0]!.status).toBe("failed");
    expect(attempts.items[0]!.metadata?.error).toMatchObject({
      type: "SpansNotStoredError",
      message: expect.stringMatching(/3 span\(s\) of attempt .* could not be stored/),
    });
    expect(spans).toHaveLength(0);
  });

  it("spans that never got a sequence id fail the attempt too, and the retry policy runs it again", async () => {
    const { summary, rollout, attempts } = await agentRun(["getManySpanSequenceIds"], {
      storeRetryDelaysMs: [0, 0],
      maxAttempts: 2,
    });
    expect(summary).toMatchObject({ succeeded: 0, failed: 1 });
    // The failure went through the retry policy: the rollout is queued for its second attempt.
    expect(attempts.items[0]!.metadata?.error).toMatchObject({ type: "SpansNotStoredError" });
    expect(rollout.status).toBe("requeuing");
  });

  it("records the outcome once the store is back when the final status update hits the outage", async () => {
    const { summary, rollout, spans } = await agentRun(
      ["getManySpanSequenceIds", "addManySpans", "updateAttempt"],
      { recoverAfterFailures: 6, storeRetryDelaysMs: [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5] },
    );
    expect(summary.succeeded).toBe(1);
    expect(rollout.status).toBe("succeeded");
    // the agent's message and reward, and the enclosing agent.rollout span
    expect(spans).toHaveLength(3);
  });
});
