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
    // The running answer is cached for at most a second.
    await new Promise((r) => setTimeout(r, 1100));
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
});
