import { ScopedTokenSigner } from "@agl/core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const messages = [{ role: "user" as const, content: "hi" }];

describe("a scoped token lives only as long as its attempt", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ tap: false });
  });
  afterAll(() => h.close());

  it("works while the attempt runs and stops once it has finished; no span lands on the finished attempt", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    await h.store.updateAttempt(rolloutId, attemptId, { status: "running" });
    // No TTL given: the default lifetime, not forever.
    const token = new ScopedTokenSigner(h.proxy.tokenSecret).mint(rolloutId, attemptId);
    const client = h.client(`${h.url}/v1`, { apiKey: token });
    await client.chat.completions.create({ model: "m", messages });
    expect(await h.spans(rolloutId)).toHaveLength(1);

    await h.store.updateAttempt(rolloutId, attemptId, { status: "succeeded" });
    // at once: no grace period after the attempt ended
    await expect(client.chat.completions.create({ model: "m", messages })).rejects.toMatchObject({
      status: 403,
      code: "attempt_finished",
    });
    expect(await h.spans(rolloutId)).toHaveLength(1);
  });

  it("an attempt that timed out or failed ends its token too", async () => {
    for (const status of ["failed", "timeout"] as const) {
      const { rolloutId, attemptId } = await h.newAttempt();
      await h.store.updateAttempt(rolloutId, attemptId, { status });
      const token = new ScopedTokenSigner(h.proxy.tokenSecret).mint(rolloutId, attemptId, { ttlSeconds: 60 });
      await expect(
        h.client(`${h.url}/v1`, { apiKey: token }).chat.completions.create({ model: "m", messages }),
      ).rejects.toMatchObject({ status: 403 });
    }
  });

  it("stops at once when the rollout is cancelled or the attempt turns unresponsive, and works again when it runs", async () => {
    const messages2 = [{ role: "user" as const, content: "again" }];
    const cancelled = await h.newAttempt();
    const cancelledToken = new ScopedTokenSigner(h.proxy.tokenSecret).mint(
      cancelled.rolloutId,
      cancelled.attemptId,
    );
    const c1 = h.client(`${h.url}/v1`, { apiKey: cancelledToken });
    await c1.chat.completions.create({ model: "m", messages: messages2 });
    await h.store.updateRollout(cancelled.rolloutId, { status: "cancelled" });
    await expect(c1.chat.completions.create({ model: "m", messages: messages2 })).rejects.toMatchObject({
      status: 403,
      code: "attempt_finished",
      message: expect.stringContaining("rollout cancelled"),
    });

    // retried when unresponsive: the rollout requeues rather than fails, and the attempt may come back
    const r = await h.store.startRollout({
      input: {},
      config: { retry_condition: ["unresponsive"], max_attempts: 3 },
    });
    const [rolloutId, attemptId] = [r.rollout_id, r.attempt.attempt_id];
    const token = new ScopedTokenSigner(h.proxy.tokenSecret).mint(rolloutId, attemptId);
    const c2 = h.client(`${h.url}/v1`, { apiKey: token });
    await c2.chat.completions.create({ model: "m", messages: messages2 });
    await h.proxy.flush(); // its span (which revives an unresponsive attempt) is in before the change
    await h.store.updateAttempt(rolloutId, attemptId, { status: "unresponsive" });
    await expect(c2.chat.completions.create({ model: "m", messages: messages2 })).rejects.toMatchObject({
      status: 403,
      message: expect.stringContaining("(unresponsive)"),
    });
    // a heartbeat brings it back: the token works again (unresponsive is not final)
    await h.store.updateAttempt(rolloutId, attemptId, { status: "running" });
    await c2.chat.completions.create({ model: "m", messages: messages2 });
    // the 403s recorded nothing
    expect(await h.spans(rolloutId)).toHaveLength(2);
    expect(await h.spans(cancelled.rolloutId)).toHaveLength(1);
  });

  it("at most one status read per call (concurrent calls share); each call after a change sees it", async () => {
    const r = await h.store.startRollout({
      input: {},
      config: { retry_condition: ["unresponsive"], max_attempts: 9 },
    });
    const [rolloutId, attemptId] = [r.rollout_id, r.attempt.attempt_id];
    const token = new ScopedTokenSigner(h.proxy.tokenSecret).mint(rolloutId, attemptId);
    const client = h.client(`${h.url}/v1`, { apiKey: token });
    let reads = 0;
    const original = h.store.getRolloutById.bind(h.store);
    h.store.getRolloutById = async (id: string) => {
      if (id === rolloutId) reads++;
      return original(id);
    };
    try {
      await Promise.all(
        Array.from({ length: 8 }, () => client.chat.completions.create({ model: "m", messages })),
      );
      expect(reads).toBeGreaterThanOrEqual(1);
      expect(reads).toBeLessThanOrEqual(8);
      for (let i = 0; i < 3; i++) {
        await h.proxy.flush();
        await h.store.updateAttempt(rolloutId, attemptId, { status: "unresponsive" });
        await expect(client.chat.completions.create({ model: "m", messages })).rejects.toMatchObject({
          status: 403,
        });
        await h.store.updateAttempt(rolloutId, attemptId, { status: "running" });
        await client.chat.completions.create({ model: "m", messages });
      }
    } finally {
      h.store.getRolloutById = original;
    }
  });
});
