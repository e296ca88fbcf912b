import { describe, expect, it } from "vitest";
import { Backend, BackendPool, rendezvousScore } from "./backends.js";
import { matchLLMRoute } from "./routes.js";

describe("matchLLMRoute", () => {
  it.each([
    ["/v1/chat/completions", { op: "chat" }],
    ["/v1/completions", { op: "completions" }],
    ["/v1/models", { op: "models" }],
    ["/chat/completions", { op: "chat" }],
    [
      "/rollout/ro-1/attempt/at-2/v1/chat/completions",
      { op: "chat", rolloutId: "ro-1", attemptId: "at-2", style: "path" },
    ],
    [
      "/rollout/ro-1/attempt/at-2/completions?x=1",
      { op: "completions", rolloutId: "ro-1", attemptId: "at-2", style: "path" },
    ],
    ["/rollout/r%2F1/attempt/a/v1/models", { op: "models", rolloutId: "r/1", attemptId: "a", style: "path" }],
    [
      "/proxy/rollout/r/attempt/0/mode/val/openai/v1/chat/completions",
      { op: "chat", rolloutId: "r", attemptId: "0", mode: "val", style: "proxy_path" },
    ],
    ["/trial-9/v1/chat/completions", { op: "chat", sessionId: "trial-9", style: "session" }],
    ["/v1/chat/completions/trial-9", { op: "chat", sessionId: "trial-9", style: "session" }],
  ])("%s", (path, expected) => {
    expect(matchLLMRoute(path)).toEqual(expected);
  });

  it.each([
    "/health",
    "/proxy/pause",
    "/sessions/abc",
    "/v1/embeddings",
    "/rollout//attempt/a/v1/chat/completions",
    "/rollout/r/attempt/a/v1/chat",
    "/proxy/rollout/r/attempt/a/mode/test/openai/v1/chat/completions",
    "/proxy/rollout/r/attempt/a/mode/train/v1/chat/completions",
    "/sessions/v1/chat/completions",
  ])("%s is not an LLM route", (path) => {
    expect(matchLLMRoute(path)).toBeNull();
  });
});

describe("rendezvous routing", () => {
  const urls = ["http://a:1/v1", "http://b:1/v1", "http://c:1/v1", "http://d:1/v1"];
  const keys = Array.from({ length: 4000 }, (_, i) => `ro-${i}`);
  const owner = (key: string, list: string[], weights: number[] = list.map(() => 1)) => {
    let best = 0;
    let bestScore = -Infinity;
    list.forEach((u, i) => {
      const s = rendezvousScore(key, { hashSeed: u, weight: weights[i]! });
      if (s > bestScore) [best, bestScore] = [i, s];
    });
    return list[best]!;
  };

  it("adding a backend moves only about 1/N of rollouts, all of them to the new backend", () => {
    const before = keys.map((k) => owner(k, urls.slice(0, 3)));
    const after = keys.map((k) => owner(k, urls));
    const moved = keys.filter((_, i) => before[i] !== after[i]);
    expect(moved.length / keys.length).toBeGreaterThan(0.2);
    expect(moved.length / keys.length).toBeLessThan(0.3);
    expect(new Set(moved.map((k) => owner(k, urls)))).toEqual(new Set([urls[3]]));
  });

  it("spreads by weight", () => {
    const counts = new Map<string, number>();
    for (const k of keys) {
      const o = owner(k, urls.slice(0, 2), [3, 1]);
      counts.set(o, (counts.get(o) ?? 0) + 1);
    }
    const share = counts.get(urls[0]!)! / keys.length;
    expect(share).toBeGreaterThan(0.7);
    expect(share).toBeLessThan(0.8);
  });

  it("ranks ejected backends last and keeps a rollout's choice stable", () => {
    const pool = new BackendPool(
      urls.slice(0, 3).map((url) => ({ url })),
      { allowedFailures: 1, cooldownMs: 60_000 },
    );
    const first = pool.rank("ro-42")[0]!;
    expect(pool.rank("ro-42")[0]).toBe(first);
    pool.recordFailure(first, "HTTP 500");
    const ranked = pool.rank("ro-42");
    expect(ranked[0]).not.toBe(first);
    expect(ranked.at(-1)).toBe(first);
    pool.stop();
  });

  it("normalises backend URLs with or without /v1", () => {
    expect(new Backend({ url: "http://h:8000" }).apiPath).toBe("/v1");
    expect(new Backend({ url: "http://h:8000/v1/" }).apiPath).toBe("/v1");
    expect(new Backend({ url: "https://h/serving" }).url).toBe("https://h/serving/v1");
  });
});
