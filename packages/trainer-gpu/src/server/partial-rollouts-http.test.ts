import { ProxySpansToTriplets } from "@agl/adapter";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Generator } from "../generate/generator.js";
import type { PolicyModel } from "../model/policy-model.js";
import { oldestServedVersion } from "../ppo/async-loop.js";
import { proxiedRollout } from "../test-support/proxied-rollout.js";
import { type VersionedServer, versionedServer } from "../test-support/versioned-server.js";
import type { PolicyServer } from "./policy-server.js";
import type { VersionedEngine } from "./version-publication.js";

/**
 * Partial rollouts over HTTP: with `inFlight: "resume"`, a non-streamed request interrupted by a
 * publication reports the version that finished it in `x-agl-model-version` and the one it started on in
 * `x-agl-model-version-start`; its tokens are the old weights' up to the switch and the new weights' from
 * that prefix on. Behind the LLM proxy the span and the triplet carry both, and the trainer's staleness
 * counts from the older one. A streamed request keeps its version (it announced it before its first token).
 */
let s: VersionedServer["s"];
let other: PolicyModel;
let original: PolicyModel;
let engine: VersionedEngine;
let server: PolicyServer<VersionedEngine>;

const MAX = 24;
const chat = { model: "policy", messages: [{ role: "user", content: "hi" }], temperature: 0 };

let setup: VersionedServer;
beforeAll(async () => {
  setup = await versionedServer({ inFlight: "resume" });
  ({ s, other, original, engine, server } = setup);
}, 120_000);

afterAll(() => setup?.stop());

/**
 * Run `call` and publish new weights (alternating `other` / `original`) once it has decoded a few steps:
 * polled between the engine's steps, so the switch lands mid-generation whatever the machine's load.
 */
async function withPublicationMidway<T>(call: () => Promise<T>): Promise<{ result: T; from: number }> {
  const from = engine.version;
  const steps = engine.steps;
  let settled = false;
  const pending = call().finally(() => {
    settled = true;
  });
  while (engine.steps < steps + 3 && !settled) await new Promise<void>((r) => setImmediate(r));
  expect(settled).toBe(false);
  s.model.setWeightsFrom((from % 2 === 0 ? other : original) as PolicyModel);
  expect(engine.publish()).toBe(from + 1);
  return { result: await pending, from };
}

/** Greedy tokens of `model`'s weights alone from `promptIds`. */
async function greedy(model: PolicyModel, promptIds: number[], maxTokens: number): Promise<number[]> {
  const g = new Generator(model.clone({ trainable: false }), s.tokenizer);
  const r = await g.generate({ promptIds, maxTokens, ignoreEos: true, temperature: 0 });
  g.policy.dispose();
  return r.tokenIds;
}

describe("partial rollouts over HTTP (inFlight: resume)", () => {
  it("a non-streamed request reports the version range; its tokens switch weights at one point", async () => {
    const { result: res, from } = await withPublicationMidway(() =>
      fetch(`${server.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...chat, max_tokens: MAX, ignore_eos: true, return_token_ids: true }),
      }),
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-agl-model-version")).toBe(String(from + 1));
    expect(res.headers.get("x-agl-model-version-start")).toBe(String(from));
    const body = (await res.json()) as {
      system_fingerprint: string;
      prompt_token_ids: number[];
      choices: Array<{ token_ids: number[] }>;
    };
    expect(body.system_fingerprint).toBe(`agl-policy-v${from + 1}`);
    const tokens = body.choices[0]!.token_ids;
    expect(tokens).toHaveLength(MAX);
    const prompt = body.prompt_token_ids;
    const oldWeights = from % 2 === 0 ? original : other;
    const newWeights = from % 2 === 0 ? other : original;
    const oldOnly = await greedy(oldWeights, prompt, MAX);
    // The switch point k: tokens before it are the old weights', after it the new weights' greedy
    // continuation of that prefix (the first k that fits; the old ones agree up to at least k).
    let agree = 0;
    while (agree < MAX && tokens[agree] === oldOnly[agree]) agree++;
    expect(agree).toBeLessThan(MAX);
    let switchAt = -1;
    for (let k = agree; k >= 1 && switchAt < 0; k--) {
      const rest = await greedy(newWeights, [...prompt, ...tokens.slice(0, k)], MAX - k);
      if (rest.every((id, i) => id === tokens[k + i])) switchAt = k;
    }
    expect(switchAt).toBeGreaterThanOrEqual(1);
  });

  it("a streamed request finishes on the version it announced", async () => {
    const from = engine.version;
    const oldWeights = from % 2 === 0 ? original : other;
    const promptIds = s.tokenizer.encode("hi");
    const { result } = await withPublicationMidway(async () => {
      const res = await fetch(`${server.baseUrl}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "policy",
          prompt: promptIds,
          temperature: 0,
          max_tokens: MAX,
          ignore_eos: true,
          stream: true,
          return_token_ids: true,
        }),
      });
      const header = res.headers.get("x-agl-model-version");
      const start = res.headers.get("x-agl-model-version-start");
      const text = await res.text();
      return { header, start, text };
    });
    expect(result.header).toBe(String(from));
    expect(result.start).toBeNull();
    const chunks = result.text
      .split("\n\n")
      .filter((e) => e.startsWith("data: {"))
      .map(
        (e) =>
          JSON.parse(e.slice(6)) as { system_fingerprint: string; choices: Array<{ token_ids?: number[] }> },
      );
    expect(new Set(chunks.map((c) => c.system_fingerprint))).toEqual(new Set([`agl-policy-v${from}`]));
    const ids = chunks.flatMap((c) => c.choices.flatMap((x) => x.token_ids ?? []));
    expect(ids).toEqual(await greedy(oldWeights, promptIds, MAX));
  });

  it("behind the LLM proxy: span, triplet and staleness accounting use the oldest version", async () => {
    const { rolloutId, client, spans: spansOf, stop } = await proxiedRollout(server.baseUrl);
    try {
      const { from } = await withPublicationMidway(() =>
        client.chat.completions.create({
          model: "policy",
          messages: [{ role: "user", content: "hi" }],
          seed: 5,
          max_tokens: MAX,
          ignore_eos: true,
        } as never),
      );
      const spans = await spansOf();
      expect(spans).toHaveLength(1);
      expect(spans[0]!.attributes["agl.proxy.model_version"]).toBe(from + 1);
      expect(spans[0]!.attributes["agl.proxy.model_version_start"]).toBe(from);
      const triplets = new ProxySpansToTriplets().adapt(spans);
      expect(triplets).toHaveLength(1);
      expect(triplets[0]!.metadata).toMatchObject({ model_version: from + 1, model_version_start: from });
      const rollout = {
        rolloutId,
        uid: "u",
        sampleIndex: 0,
        repeat: 0,
        status: "succeeded" as const,
        reward: 1,
        triplets,
      };
      expect(oldestServedVersion(rollout as never)).toBe(from);
    } finally {
      await stop();
    }
  });
});
