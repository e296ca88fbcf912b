/** Pausing the proxy for a weight update: drain in-flight calls, 429 or hold new ones, resume. */
import { until } from "@agl/core/testing";
import { describe, expect, it } from "vitest";
import { startHarness } from "./test-support/harness.js";

const messages = [{ role: "user" as const, content: "a fairly long question to stream back in pieces" }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("pause, drain, resume", () => {
  it("drains an in-flight call, rejects new ones with 429 + Retry-After, then resumes", async () => {
    const h = await startHarness({ mocks: [{ delayMs: 1000 }] });
    try {
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      const inflight = client.chat.completions.create({ model: "m", messages });
      await until(() => h.proxy.state().inflight === 1);
      let drained = false;
      const pausing = h.proxy
        .pause({ drain: true, retryAfterSeconds: 2, reason: "weight update" })
        .then((s) => {
          drained = true;
          return s;
        });
      await sleep(20);
      expect(drained).toBe(false);
      const rejected = await fetch(
        `${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages }),
        },
      );
      expect(rejected.status).toBe(429);
      expect(rejected.headers.get("retry-after")).toBe("2");
      expect(rejected.headers.get("x-agl-paused")).toBe("true");
      expect(await rejected.json()).toEqual({ error: "gateway paused", reason: "weight update" });
      const state = await pausing;
      expect(state).toMatchObject({ paused: true, inflight: 0, reason: "weight update" });
      // the drained call completed normally and its span is already in the store
      expect((await inflight).choices[0]!.message.content).toContain("Echo:");
      expect((await h.store.querySpans(a.rolloutId)).items).toHaveLength(1);
      const resumed = await h.proxy.resume({ modelVersion: 2 });
      expect(resumed).toMatchObject({ paused: false, reason: null, model_version: 2 });
      await client.chat.completions.create({ model: "m", messages });
      const spans = await h.spans(a.rolloutId);
      expect(spans.map((s) => s.attributes["agl.proxy.model_version"])).toEqual([undefined, 2]);
    } finally {
      await h.close();
    }
  });

  it("POST /proxy/drain returns only once ended calls' spans are in the store (slow store)", async () => {
    const h = await startHarness();
    try {
      // a store that takes 150 ms per write, so the agent has its answer long before the span lands
      const slow = <A extends unknown[], R>(fn: (...args: A) => Promise<R>) =>
        (async (...args: A) => {
          await sleep(150);
          return fn(...args);
        }) as (...args: A) => Promise<R>;
      h.store.addManySpans = slow(h.store.addManySpans.bind(h.store));
      h.store.addSpan = slow(h.store.addSpan.bind(h.store));
      const a = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      await client.chat.completions.create({ model: "m", messages });
      expect((await h.store.querySpans(a.rolloutId)).items).toHaveLength(0);
      const drained = await fetch(`${h.url}/proxy/drain?timeout=5`, { method: "POST" });
      expect(await drained.json()).toMatchObject({ drained: true, inflight: 0 });
      expect((await h.store.querySpans(a.rolloutId)).items).toHaveLength(1);
    } finally {
      await h.close();
    }
  });

  it("hold mode parks calls until resume, so SDK retries never run out", async () => {
    const h = await startHarness({ proxy: { pauseMode: "hold" } });
    try {
      const a = await h.newAttempt();
      await h.proxy.pause();
      const client = h.client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`);
      let done = false;
      const call = client.chat.completions.create({ model: "m", messages }).then((r) => {
        done = true;
        return r;
      });
      await until(() => h.proxy.state().held === 1);
      expect(done).toBe(false);
      expect(h.proxy.state()).toMatchObject({ paused: true, held: 1, inflight: 0 });
      await h.proxy.resume();
      expect((await call).choices[0]!.message.content).toContain("Echo:");
    } finally {
      await h.close();
    }
  });

  it("hold mode turns a parked call away with 429 once maxHoldMs has passed", async () => {
    const h = await startHarness({ proxy: { pauseMode: "hold", maxHoldMs: 200, retryAfterSeconds: 3 } });
    try {
      const a = await h.newAttempt();
      await h.proxy.pause({ reason: "long update" });
      const t0 = Date.now();
      const res = await fetch(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages }),
      });
      const waited = Date.now() - t0;
      expect(waited).toBeGreaterThanOrEqual(190);
      expect(waited).toBeLessThan(20_000);
      expect(res.status).toBe(429);
      expect(res.headers.get("retry-after")).toBe("3");
      expect(await res.json()).toEqual({ error: "gateway paused", reason: "long update" });
      expect(h.proxy.state()).toMatchObject({ paused: true, held: 0, inflight: 0 });
      expect(h.mocks[0]!.requests).toHaveLength(0);
      expect(await h.spans(a.rolloutId)).toHaveLength(0);
    } finally {
      await h.close();
    }
  });

  it("uses the retryAfterSeconds option for pauses that name none; a pause's own value lasts one pause", async () => {
    const h = await startHarness({ proxy: { retryAfterSeconds: 42 } });
    try {
      const a = await h.newAttempt();
      const post = () =>
        fetch(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages }),
        });
      expect((await h.proxy.pause()).retry_after_seconds).toBe(42);
      const first = await post();
      expect(first.status).toBe(429);
      expect(first.headers.get("retry-after")).toBe("42");
      await h.proxy.resume();
      await h.proxy.pause({ retryAfterSeconds: 1.5 });
      expect((await post()).headers.get("retry-after")).toBe("2");
      // pausing again while paused (say, to drain) keeps what the pause set
      expect((await h.proxy.pause({ drain: true })).retry_after_seconds).toBe(1.5);
      await h.proxy.resume();
      expect((await h.proxy.pause()).retry_after_seconds).toBe(42);
    } finally {
      await h.close();
    }
  });

  it("HTTP control routes: pause with drain, state, resume (admin token required)", async () => {
    const h = await startHarness({
      mocks: [{ delayMs: 200 }],
      proxy: { adminToken: "admin-secret-123", llmAuth: "none" },
    });
    try {
      const auth = { authorization: "Bearer admin-secret-123", "content-type": "application/json" };
      expect((await fetch(`${h.url}/proxy/state`)).status).toBe(401);
      expect(
        (await fetch(`${h.url}/proxy/pause`, { method: "POST", headers: { authorization: "Bearer nope" } }))
          .status,
      ).toBe(401);
      const a = await h.newAttempt();
      // a call that ended before the pause: pausing with drain has nothing left in flight
      await h
        .client(`${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1`)
        .chat.completions.create({ model: "m", messages });
      const paused = await fetch(`${h.url}/proxy/pause`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ retry_after_seconds: 7, reason: "sync", drain: true }),
      });
      expect(await paused.json()).toMatchObject({
        paused: true,
        inflight: 0,
        retry_after_seconds: 7,
        reason: "sync",
      });
      const bad = await fetch(`${h.url}/proxy/pause`, {
        method: "POST",
        headers: auth,
        body: JSON.stringify({ retry_after: 1 }),
      });
      expect(bad.status).toBe(422);
      const state = await (
        await fetch(`${h.url}/proxy/state`, { headers: { "x-api-key": "admin-secret-123" } })
      ).json();
      expect(state).toMatchObject({ paused: true });
      const resumed = await (await fetch(`${h.url}/proxy/resume`, { method: "POST", headers: auth })).json();
      expect(resumed).toMatchObject({ paused: false, reason: null });
    } finally {
      await h.close();
    }
  });
});
