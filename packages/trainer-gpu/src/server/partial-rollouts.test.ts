import { describe, expect, it } from "vitest";
import { Generator } from "../generate/generator.js";
import type { GenerateRequest, GenerateResult } from "../generate/request.js";
import type { CausalLM } from "../model/causal-lm.js";
import { tinySetup } from "../test-support/tiny.js";
import { VersionedEngine } from "./version-publication.js";

/**
 * Partial rollouts (`inFlight: "resume"`): a publication interrupts the sequences in flight, which go on
 * from where they are on the new weights. Checked against each version's weights alone: the tokens
 * before the switch are what the old weights produce, the tokens after it what the new weights produce
 * from that prefix, and every token's logprob is the one of the weights that sampled it. The default
 * ("finish") and pinned requests (streamed responses) keep finishing on the version they started on.
 */

/** What `model`'s weights alone produce for `req` (greedy, so independent of the sampler's state). */
async function reference(model: CausalLM, setup: { tokenizer: never }, req: GenerateRequest) {
  return new Generator(model.clone({ trainable: false }), setup.tokenizer).generate(req);
}

const logprobs = (r: GenerateResult) => r.tokens.map((t) => t.logprob);

describe("VersionedEngine inFlight: resume", () => {
  it("a generation interrupted by a publication continues on the new weights from its prefix", async () => {
    const s = await tinySetup(21);
    const { model: other } = await tinySetup(99);
    const original = s.model.clone({ trainable: false });
    const promptIds = s.template.encodeChat([{ role: "user", content: "hi" }]).ids;
    const params = { promptIds, maxTokens: 16, ignoreEos: true, temperature: 0 };
    const oldOnly = await reference(original, s as never, params);
    const newOnly = await reference(other, s as never, params);
    expect(newOnly.tokenIds).not.toEqual(oldOnly.tokenIds);

    const engine = new VersionedEngine(s.model, s.tokenizer, { inFlight: "resume" });
    let seen = 0;
    const versionsSeen: number[] = [];
    const [r] = await engine.generateMany([
      {
        ...params,
        onToken: (e) => {
          if (e.token) versionsSeen.push(e.modelVersion as number);
          // Mid-generation (inside a decode step): the trainer updates the source and publishes.
          if (++seen !== 5) return;
          s.model.setWeightsFrom(other);
          expect(engine.publish()).toBe(1);
        },
      },
    ]);
    // The switch lands at the next step boundary: 5 tokens from version 0, the rest from version 1.
    expect(r!.modelVersion).toBe(1);
    expect(r!.versionSegments).toEqual([
      { version: 0, fromToken: 0 },
      { version: 1, fromToken: 5 },
    ]);
    expect(versionsSeen).toEqual([...new Array(5).fill(0), ...new Array(11).fill(1)]);
    expect(r!.tokenIds).toHaveLength(16);
    expect(r!.tokenIds.slice(0, 5)).toEqual(oldOnly.tokenIds.slice(0, 5));
    const prefix = r!.tokenIds.slice(0, 5);
    const resumed = await reference(other, s as never, {
      ...params,
      promptIds: [...promptIds, ...prefix],
      maxTokens: 11,
    });
    expect(r!.tokenIds.slice(5)).toEqual(resumed.tokenIds);
    // Behaviour logprobs: each token's is the one of the weights that sampled it.
    const expected = [...logprobs(oldOnly).slice(0, 5), ...logprobs(resumed)];
    logprobs(r!).forEach((lp, i) => {
      expect(lp).toBeCloseTo(expected[i] as number, 4);
    });
    // The old snapshot was released once its sequence moved: only the new version is live.
    expect(engine.liveVersions).toEqual([1]);
    engine.dispose();
  });

  it("the default (finish) and pinned requests keep their version; a queued request starts on the new one", async () => {
    const s = await tinySetup(21);
    const { model: other } = await tinySetup(99);
    const original = s.model.clone({ trainable: false });
    const promptIds = s.template.encodeChat([{ role: "user", content: "hi" }]).ids;
    const params = { promptIds, maxTokens: 12, ignoreEos: true, temperature: 0 };
    const oldOnly = await reference(original, s as never, params);
    const newOnly = await reference(other, s as never, params);

    for (const [options, pin] of [
      [{}, false],
      [{ inFlight: "finish" as const }, false],
      [{ inFlight: "resume" as const }, true],
    ] as const) {
      s.model.setWeightsFrom(original);
      const engine = new VersionedEngine(s.model, s.tokenizer, { ...options, maxBatchSize: 1 });
      let seen = 0;
      let queued: Promise<GenerateResult[]> | undefined;
      const [r] = await engine.generateMany([
        {
          ...params,
          ...(pin ? { pinVersion: true } : {}),
          onToken: () => {
            if (++seen !== 3) return;
            // A second request queues behind the first (batch of one), then a publication.
            queued = engine.generateMany([{ ...params }]);
            s.model.setWeightsFrom(other);
            engine.publish();
          },
        },
      ]);
      expect(r!.modelVersion).toBe(0);
      expect(r!.versionSegments).toBeUndefined();
      expect(r!.tokenIds).toEqual(oldOnly.tokenIds);
      const [q] = (await queued) as GenerateResult[];
      if (options.inFlight === "resume") {
        // Not started when the version changed: it runs wholly on the new one (no segments).
        expect(q!.modelVersion).toBe(1);
        expect(q!.versionSegments).toBeUndefined();
        expect(q!.tokenIds).toEqual(newOnly.tokenIds);
      } else {
        // "finish": bound to the version it arrived on, even while it only queued.
        expect(q!.modelVersion).toBe(0);
        expect(q!.tokenIds).toEqual(oldOnly.tokenIds);
      }
      engine.dispose();
    }
  });

  it("moves every choice of a call together and survives publications in quick succession", async () => {
    const s = await tinySetup(21);
    const models = [(await tinySetup(99)).model, (await tinySetup(5)).model];
    const promptIds = s.template.encodeChat([{ role: "user", content: "hi" }]).ids;
    const engine = new VersionedEngine(s.model, s.tokenizer, { inFlight: "resume" });
    let seen = 0;
    const params = { promptIds, maxTokens: 20, ignoreEos: true, temperature: 1 };
    const results = await engine.generateMany([
      {
        ...params,
        seed: 1,
        onToken: () => {
          seen++;
          // Two publications inside one step, then one more later: sequences end on the newest.
          if (seen === 4) {
            s.model.setWeightsFrom(models[0]!);
            engine.publish();
            s.model.setWeightsFrom(models[1]!);
            engine.publish();
          }
          if (seen === 10) engine.publish();
        },
      },
      { ...params, seed: 2 },
    ]);
    for (const r of results) {
      expect(r.tokenIds).toHaveLength(20);
      expect(r.modelVersion).toBe(3);
      // Version 1 was superseded before it produced a token: it is not recorded.
      expect(r.versionSegments?.map((x) => x.version)).toEqual([0, 2, 3]);
    }
    // The choice that triggered them: the switches land at the step boundaries after its 4th and 10th
    // tokens. Both choices moved together, at the same boundaries (the same number of steps apart).
    const [a, b] = results.map((r) => r.versionSegments!.map((x) => x.fromToken));
    expect(a).toEqual([0, 4, 10]);
    expect(b![2]! - b![1]!).toBe(6);
    expect(engine.liveVersions).toEqual([3]);
    // The engine keeps serving: a new request runs on version 3 alone.
    const [next] = await engine.generateMany([{ ...params, seed: 3 }]);
    expect(next!.modelVersion).toBe(3);
    expect(next!.versionSegments).toBeUndefined();
    engine.dispose();
  });
});
