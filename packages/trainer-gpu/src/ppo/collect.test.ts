import {
  type AttemptedRollout,
  InMemoryLightningStore,
  rewardAttributes,
  SPAN_NAMES,
  type Span,
  type Triplet,
} from "@agl/core";
import { makeSpan, sleep, until } from "@agl/core/testing";
import { afterEach, describe, expect, it } from "vitest";
import { CollectAbortedError, collectRollouts } from "./collect.js";

/**
 * collectRollouts against the in-memory store, with the test playing the runner: it claims rollouts,
 * writes a reward span and finishes them, in whatever order it likes.
 */

let store: InMemoryLightningStore;
afterEach(async () => {
  await store?.close();
});

/** Adapter stand-in: one triplet per rollout carrying the number of spans it saw. */
const adapter = {
  adapt: (spans: Span[]): Triplet[] => [
    { prompt: { token_ids: [1] }, response: { token_ids: [spans.length] }, reward: null, metadata: {} },
  ],
};

async function claimAll(s: InMemoryLightningStore): Promise<AttemptedRollout[]> {
  const claimed: AttemptedRollout[] = [];
  for (;;) {
    const r = await s.dequeueRollout();
    if (!r) return claimed;
    claimed.push(r);
  }
}

async function finish(s: InMemoryLightningStore, r: AttemptedRollout, reward: number): Promise<void> {
  await s.addSpan(
    makeSpan(r.attempt, 1, { name: SPAN_NAMES.annotation, attributes: rewardAttributes(reward) }),
  );
  await s.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
}

const options = (signal: AbortSignal) => ({
  store,
  adapter,
  samples: [
    { index: 7, task: { q: "seven" } },
    { index: 3, task: { q: "three" } },
  ],
  n: 3,
  mode: "train" as const,
  resourcesId: "ppo-train",
  timeoutSeconds: 60,
  pollSeconds: 0.02,
  seedOf: (i: number, r: number) => i * 100 + r,
  dataIdOf: (i: number) => `train-1-${i}`,
  signal,
});

describe("collectRollouts", () => {
  it("enqueues n repeats per sample under one data_id and returns them by (sample, repeat)", async () => {
    store = new InMemoryLightningStore();
    const pending = collectRollouts(options(new AbortController().signal));
    await until(async () => (await store.queryRollouts({})).items.length === 6);
    const claimed = await claimAll(store);
    expect(claimed).toHaveLength(6);
    const meta = claimed.map((r) => r.metadata as Record<string, unknown>);
    expect(meta.map((m) => m.data_id)).toEqual([
      "train-1-7",
      "train-1-7",
      "train-1-7",
      "train-1-3",
      "train-1-3",
      "train-1-3",
    ]);
    expect(meta.map((m) => m.seed)).toEqual([700, 701, 702, 300, 301, 302]);
    expect(claimed.every((r) => r.mode === "train" && r.resources_id === "ppo-train")).toBe(true);
    expect(claimed.map((r) => (r.input as { q: string }).q)).toEqual([
      "seven",
      "seven",
      "seven",
      "three",
      "three",
      "three",
    ]);
    // finish in reverse order, with distinct rewards, across several polls
    for (const [k, r] of [...claimed.entries()].reverse()) {
      await finish(store, r, k / 10);
      if (k % 2 === 0) await sleep(30);
    }
    const out = await pending;
    expect(out.map((r) => [r.sampleIndex, r.repeat])).toEqual([
      [7, 0],
      [7, 1],
      [7, 2],
      [3, 0],
      [3, 1],
      [3, 2],
    ]);
    expect(out.map((r) => r.uid)).toEqual(meta.map((m) => m.data_id));
    expect(out.map((r) => r.reward)).toEqual([0, 0.1, 0.2, 0.3, 0.4, 0.5]);
    expect(out.map((r) => r.rolloutId)).toEqual(claimed.map((r) => r.rollout_id));
    expect(out.every((r) => r.status === "succeeded" && r.triplets.length === 1)).toBe(true);
  });

  it("on abort, rejects promptly and cancels every unfinished rollout (queued or running)", async () => {
    store = new InMemoryLightningStore();
    const controller = new AbortController();
    const pending = collectRollouts(options(controller.signal));
    await until(async () => (await store.queryRollouts({})).items.length === 6);
    const running = (await store.dequeueRollout())!;
    const done = (await store.dequeueRollout())!;
    await finish(store, done, 1);
    await sleep(50);
    const t0 = performance.now();
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(CollectAbortedError);
    // The running rollout never finishes by itself: only the abort ends the wait.
    expect(performance.now() - t0).toBeLessThan(10_000);
    const all = (await store.queryRollouts({})).items;
    const status = new Map(all.map((r) => [r.rollout_id, r.status]));
    expect(status.get(done.rollout_id)).toBe("succeeded");
    expect(status.get(running.rollout_id)).toBe("cancelled");
    expect(all.filter((r) => r.status === "cancelled")).toHaveLength(5);
    // nothing is left for a runner to pick up on the next weights
    expect(await store.dequeueRollout()).toBeNull();
  });

  it("an already-aborted signal enqueues, then cancels everything", async () => {
    store = new InMemoryLightningStore();
    const controller = new AbortController();
    controller.abort();
    await expect(collectRollouts(options(controller.signal))).rejects.toBeInstanceOf(CollectAbortedError);
    const all = (await store.queryRollouts({})).items;
    expect(all).toHaveLength(6);
    expect(all.every((r) => r.status === "cancelled")).toBe(true);
  });
});

describe("collectRollouts beforeAdapt", () => {
  it("reads spans only after beforeAdapt resolves, so late proxy spans are seen", async () => {
    store = new InMemoryLightningStore();
    let late: AttemptedRollout[] = [];
    const pending = collectRollouts({
      ...options(new AbortController().signal),
      // a span that lands after its rollout ended, as the proxy's deferred write does
      beforeAdapt: async () => {
        await sleep(20);
        for (const r of late) {
          await store.addSpan(makeSpan(r.attempt, 2, { name: "openai.chat.completion", attributes: {} }));
        }
      },
    });
    await until(async () => (await store.queryRollouts({})).items.length === 6);
    late = await claimAll(store);
    for (const r of late) await finish(store, r, 1);
    const collected = await pending;
    // the adapter stand-in reports how many spans it saw: the reward span and the late one
    expect(collected.map((c) => c.triplets[0]!.response.token_ids[0])).toEqual([2, 2, 2, 2, 2, 2]);
  });
});
