import type { Attempt } from "@agl/core";
import { describe, expect, it } from "vitest";
import { AttemptDirectory, type AttemptLookup } from "./attempt-directory.js";
import { type Harness, startHarness } from "./test-support/harness.js";

const messages = [{ role: "user" as const, content: "hi" }];
const post = (h: Harness, path: string, headers: Record<string, string> = {}) =>
  fetch(`${h.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "m", messages }),
  });

describe("calls naming an attempt the store does not have", () => {
  it("get 404 by every explicit style (as Agent Lightning v1.0), never reaching the upstream", async () => {
    const h = await startHarness();
    try {
      const real = await h.newAttempt();
      h.proxy.createSession("bound-to-nothing", { rolloutId: "ro-missing", attemptId: "at-missing" });
      const answers = await Promise.all([
        post(h, "/rollout/ro-missing/attempt/at-1/v1/chat/completions"),
        post(h, "/proxy/rollout/ro-missing/attempt/0/mode/train/openai/v1/chat/completions"),
        // a real rollout, an attempt it does not have
        post(h, `/rollout/${real.rolloutId}/attempt/at-other/v1/chat/completions`),
        post(h, "/v1/chat/completions", { "x-rollout-id": "ro-missing", "x-attempt-id": "a" }),
        post(h, "/bound-to-nothing/v1/chat/completions"),
        post(h, "/v1/chat/completions", {
          authorization: `Bearer ${h.proxy.mintAttemptToken("ro-missing", "at-1")}`,
        }),
      ]);
      for (const res of answers) {
        expect(res.status).toBe(404);
        expect((await res.json()).error.code).toBe("unknown_attempt");
      }
      expect(h.mocks[0]!.requests).toHaveLength(0);
      // the real attempt still works
      expect(
        (await post(h, `/rollout/${real.rolloutId}/attempt/${real.attemptId}/v1/chat/completions`)).status,
      ).toBe(200);
    } finally {
      await h.close();
    }
  });

  it("asks the store once per rollout (cached), and caches a miss briefly", async () => {
    const h = await startHarness({ tap: false });
    try {
      let lookups = 0;
      const query = h.store.queryAttempts.bind(h.store);
      h.store.queryAttempts = (rid, q) => {
        lookups++;
        return query(rid, q);
      };
      const a = await h.newAttempt();
      const path = `/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`;
      const first = await Promise.all([post(h, path), post(h, path), post(h, path)]);
      expect(first.map((r) => r.status)).toEqual([200, 200, 200]);
      for (let i = 0; i < 3; i++) expect((await post(h, path)).status).toBe(200);
      expect(lookups).toBe(1);
      expect(await h.spans(a.rolloutId)).toHaveLength(6);

      // an attempt the rollout does not have: asked once, the miss then cached
      const missing = `/rollout/${a.rolloutId}/attempt/at-retry/v1/chat/completions`;
      expect((await post(h, missing)).status).toBe(404);
      expect((await post(h, missing)).status).toBe(404);
      expect(lookups).toBe(2);
    } finally {
      await h.close();
    }
  });

  it("with unknownAttempts 'forward': forwarded, and the span the store rejects is logged and counted", async () => {
    const h = await startHarness({
      tap: false,
      proxy: { unknownAttempts: "forward", adminToken: "admin-token-12345", llmAuth: "none" },
    });
    try {
      const a = await h.newAttempt();
      expect((await post(h, "/rollout/ro-ghost/attempt/at-1/v1/chat/completions")).status).toBe(200);
      // an unbound trace id is the rollout id: forwarded whatever the option, and counted when rejected
      expect((await post(h, "/v1/chat/completions", { trace_id: "trace-ghost" })).status).toBe(200);
      expect(
        (await post(h, `/rollout/${a.rolloutId}/attempt/${a.attemptId}/v1/chat/completions`)).status,
      ).toBe(200);
      await h.proxy.flush();
      expect(h.proxy.state()).toMatchObject({ spans_recorded: 1, spans_failed: 2 });
      const state = await (
        await fetch(`${h.url}/proxy/state`, { headers: { authorization: "Bearer admin-token-12345" } })
      ).json();
      expect(state).toMatchObject({ spans_recorded: 1, spans_failed: 2, paused: false });
      expect(state.last_span_error).toMatch(/^trace-ghost\/0: /);
      const logged = h.warnings.filter((w) => w.startsWith("error: recording a span"));
      expect(logged).toHaveLength(2);
      expect(logged[0]).toContain("ro-ghost/at-1");
    } finally {
      await h.close();
    }
  });
});

describe("AttemptDirectory", () => {
  it("finds an attempt created after a miss once the miss expires, and fails open when the store fails", async () => {
    const attempts = new Map<string, string[]>([["ro-1", ["at-1"]]]);
    let lookups = 0;
    let broken = false;
    const store: AttemptLookup = {
      queryAttempts: async (rid) => {
        lookups++;
        if (broken) throw new Error("store down");
        const items = (attempts.get(rid) ?? []).map((attempt_id) => ({ attempt_id }) as Attempt);
        return { items, limit: -1, offset: 0, total: items.length };
      },
    };
    const errors: string[] = [];
    const dir = new AttemptDirectory(store, { warn() {}, error: (m) => errors.push(m) }, 50);
    expect(dir.cached("ro-1", "at-1")).toBeUndefined();
    expect(await dir.exists("ro-1", "at-1")).toBe(true);
    expect(dir.cached("ro-1", "at-1")).toBe(true);
    // the trainer starts a retry attempt just after the agent's first call for it
    expect(await dir.exists("ro-1", "at-2")).toBe(false);
    attempts.set("ro-1", ["at-1", "at-2"]);
    expect(await dir.exists("ro-1", "at-2")).toBe(false);
    expect(lookups).toBe(2);
    await new Promise((r) => setTimeout(r, 60));
    expect(dir.cached("ro-1", "at-2")).toBeUndefined();
    expect(await dir.exists("ro-1", "at-2")).toBe(true);
    expect(lookups).toBe(3);
    broken = true;
    expect(await dir.exists("ro-2", "at-1")).toBe(true);
    expect(errors[0]).toMatch(/ro-2.*store down/);
    // a failed lookup is not cached: the next call asks again
    expect(dir.cached("ro-2", "at-1")).toBeUndefined();
  });
});
