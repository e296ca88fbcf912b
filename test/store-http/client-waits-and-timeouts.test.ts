/**
 * LightningStoreClient against a real store server: the waitForRollouts long-poll over several
 * server-capped rounds, and no duplicate enqueue when the server's per-request timeout answers 504
 * while the store call still commits.
 */
import { LightningStoreClient } from "@agl/client";
import {
  type EnqueueRolloutRequest,
  InMemoryLightningStore,
  type Rollout,
  SpansEvictedError,
} from "@agl/core";
import { makeSpan } from "@agl/core/testing";
import type { StoreServer, StoreServerLogger } from "@agl/store";
import { afterEach, describe, expect, it } from "vitest";
import { serve } from "./support.js";

const cleanups: Array<() => Promise<void>> = [];
const timers: NodeJS.Timeout[] = [];
/** setTimeout that the test's cleanup cancels, so nothing touches a closed store. */
const later = (ms: number, fn: () => unknown) => timers.push(setTimeout(fn, ms));
afterEach(async () => {
  for (const t of timers.splice(0)) clearTimeout(t);
  while (cleanups.length) await cleanups.pop()!();
});

/** Counts requests per path through the server's request log. */
function countingLogger(): { logger: StoreServerLogger; count: (path: string) => number } {
  const paths: string[] = [];
  return {
    logger: {
      info: (msg, fields) => {
        if (msg === "request") paths.push(String(fields?.path));
      },
      warn() {},
      error() {},
    },
    count: (path) => paths.filter((p) => p === path).length,
  };
}

async function setup(options: Parameters<typeof serve>[1], store = new InMemoryLightningStore()) {
  const { logger, count } = countingLogger();
  const server: StoreServer = await serve(store, { ...options, logger });
  const client = new LightningStoreClient({ url: server.url, retryDelaysMs: [20, 20, 20] });
  cleanups.push(async () => {
    await client.close();
    await server.close();
    await store.close();
  });
  return { store, client, count };
}

async function finish(store: InMemoryLightningStore, rollout: Rollout): Promise<void> {
  const claimed = await store.startAttempt(rollout.rollout_id);
  await store.updateAttempt(rollout.rollout_id, claimed.attempt.attempt_id, { status: "succeeded" });
}

/**
 * Runs `fn` once the server has answered `n` requests on `path`: the tests below wait for rounds to
 * happen rather than for a time, so a loaded machine (slow rounds) changes nothing.
 */
function whenCount(count: (path: string) => number, path: string, n: number, fn: () => unknown): void {
  const poll = () => {
    if (count(path) >= n) void fn();
    else later(10, poll);
  };
  poll();
}

const WAITS = "/v1/agl/waits/rollouts";

describe("waitForRollouts long-polls across server caps", () => {
  it("loops over several capped rounds until the rollouts finish", async () => {
    // The server caps each wait at 0.2 s; the client asks for 10 s chunks.
    const { store, client, count } = await setup({ maxWaitSeconds: 0.2 });
    const a = await store.enqueueRollout({ input: 1 });
    const b = await store.enqueueRollout({ input: 2 });
    whenCount(count, WAITS, 4, async () => {
      await finish(store, a);
      await finish(store, b);
    });
    const done = await client.waitForRollouts([a.rollout_id, b.rollout_id], { timeoutSeconds: 60 });
    expect(done.map((r) => r.rollout_id).sort()).toEqual([a.rollout_id, b.rollout_id].sort());
    expect(done.every((r) => r.status === "succeeded")).toBe(true);
    expect(count(WAITS)).toBeGreaterThanOrEqual(4);
  });

  it("a completion wakes the running round instead of waiting for its end", async () => {
    // Rounds of 30 s (client chunk under a 60 s server cap): returning within seconds of the completion
    // can only be the wake-up, on however loaded a machine.
    const inner = new InMemoryLightningStore();
    let waiting = false;
    const watched = new Proxy(inner, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver);
        if (typeof value !== "function") return value;
        if (key !== "waitForRollouts") return value.bind(target);
        return (...args: unknown[]) => {
          waiting = true;
          return value.apply(target, args);
        };
      },
    });
    const { client: first, count } = await setup({ maxWaitSeconds: 60 }, watched);
    const client = new LightningStoreClient({ url: first.url, waitChunkSeconds: 30 });
    cleanups.push(() => client.close());
    const a = await inner.enqueueRollout({ input: 1 });
    let finishedAt = 0;
    const poll = async () => {
      if (!waiting) return void later(10, poll);
      await finish(inner, a);
      finishedAt = performance.now();
    };
    void poll();
    const done = await client.waitForRollouts([a.rollout_id], { timeoutSeconds: 120 });
    const returnedAt = performance.now();
    expect(done.map((r) => r.rollout_id)).toEqual([a.rollout_id]);
    expect(finishedAt).toBeGreaterThan(0);
    expect(returnedAt - finishedAt).toBeLessThan(15_000);
    expect(count(WAITS)).toBe(1);
  });

  it("client chunks shorter than the server cap also loop, and keep what finished in earlier rounds", async () => {
    const { store, client, count } = await setup({ maxWaitSeconds: 20 });
    const url = client.url;
    const chunked = new LightningStoreClient({ url, waitChunkSeconds: 0.15 });
    cleanups.push(() => chunked.close());
    const a = await store.enqueueRollout({ input: 1 });
    const b = await store.enqueueRollout({ input: 2 });
    whenCount(count, WAITS, 2, () => finish(store, a));
    whenCount(count, WAITS, 4, () => finish(store, b));
    const done = await chunked.waitForRollouts([a.rollout_id, b.rollout_id]);
    expect(done.map((r) => r.rollout_id).sort()).toEqual([a.rollout_id, b.rollout_id].sort());
    expect(count(WAITS)).toBeGreaterThanOrEqual(4);
  });

  it("honours the overall timeout across rounds and returns what finished", async () => {
    const { store, client, count } = await setup({ maxWaitSeconds: 0.2 });
    const a = await store.enqueueRollout({ input: 1 });
    const never = await store.enqueueRollout({ input: 2 });
    await finish(store, a);
    const started = performance.now();
    const done = await client.waitForRollouts([a.rollout_id, never.rollout_id], { timeoutSeconds: 1 });
    const elapsed = performance.now() - started;
    expect(done.map((r) => r.rollout_id)).toEqual([a.rollout_id]);
    expect(elapsed).toBeGreaterThanOrEqual(950);
    // Far below any default wait: the 1 s budget ended the loop (a loaded machine only adds latency).
    expect(elapsed).toBeLessThan(20_000);
    expect(count(WAITS)).toBeGreaterThanOrEqual(2);
  });
});

describe("a 504 from the server's request timeout is not resent for creates", () => {
  it("an enqueue that times out on the server but commits is stored once", async () => {
    const inner = new InMemoryLightningStore();
    // The store call outlives the server's 150 ms request timeout, then commits.
    const slow = new Proxy(inner, {
      get(target, key, receiver) {
        if (key === "enqueueManyRollouts") {
          return async (requests: EnqueueRolloutRequest[]) => {
            await new Promise((resolve) => setTimeout(resolve, 300));
            return target.enqueueManyRollouts(requests);
          };
        }
        const value = Reflect.get(target, key, receiver);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const { client, count } = await setup({ requestTimeoutMs: 150 }, slow);
    const error = await client.enqueueRollout({ input: "once" }).catch((e) => e);
    expect(error.status).toBe(504);
    // The server logs a request before answering it, so once the client has its 504 the request count is
    // final; then wait for the slow store call to commit (however long a loaded machine makes it).
    expect(count("/v1/agl/queues/rollouts/enqueue")).toBe(1);
    let stored = await inner.queryRollouts();
    while (stored.items.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      stored = await inner.queryRollouts();
    }
    expect(stored.items.map((r) => r.input)).toEqual(["once"]);
    expect(count("/v1/agl/queues/rollouts/enqueue")).toBe(1);
    // Reads and patches are still retried on the same 504.
    expect(await client.getRolloutById(stored.items[0]!.rollout_id)).toMatchObject({ input: "once" });
  });
});

describe("evicted spans over HTTP", () => {
  it("a 410 from the server is a SpansEvictedError on the client, naming the rollout", async () => {
    const store = new InMemoryLightningStore({ spanEviction: { maxSpans: 1, safeRatio: 1 } });
    const { client } = await setup({}, store);
    const old = await store.startRollout({ input: 1 });
    await client.addSpan(makeSpan(old.attempt, 1));
    await store.updateAttempt(old.rollout_id, "latest", { status: "succeeded" });
    const next = await store.startRollout({ input: 2 });
    await client.addSpan(makeSpan(next.attempt, 1)); // over the limit: the finished rollout's span goes
    const error = await client.querySpans(old.rollout_id).catch((e: unknown) => e);
    expect(SpansEvictedError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ status: 410, rolloutId: old.rollout_id });
    expect((await client.querySpans(next.rollout_id)).total).toBe(1);
  });
});
