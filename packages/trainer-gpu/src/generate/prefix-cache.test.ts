import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { parseHfConfig } from "../pretrained/hf-config.js";
import { applyLora } from "../pretrained/lora.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { randomCheckpointConfig } from "../pretrained/random-checkpoint.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { Generator } from "./generator.js";
import { PrefixCache } from "./prefix-cache.js";
import type { GenerateResult } from "./request.js";

/**
 * Prefix caching in the Generator: same tokens and log-probs as without the cache, memory bounded with
 * least-recently-used eviction, and no stale keys/values after the weights change.
 */

const tokenizer = new Tokenizer({ chars: "abcdefghijklmnopqrstuvwxyz0123456789 .,!?" });
beforeAll(async () => {
  await selectBackend({ log: () => {} });
});

function model(seed: number): PretrainedModel {
  const { arch } = parseHfConfig(
    randomCheckpointConfig({ family: "qwen3", seed, vocabSize: tokenizer.vocabSize }),
  );
  return PretrainedModel.random(arch, seed, { std: 0.3 });
}

// A 40-token preamble every request carries (as a chat template's tool block), then its own question.
const PREAMBLE = tokenizer.encode("you are a calculator agent. use the tool, then answer. ");
const prompt = (q: string) => [...PREAMBLE, ...tokenizer.encode(q)];
const QUESTIONS = ["what is 12 times 7?", "add 3 and 4", "what is 9 minus 5, then times 2?", "add 3 and 4"];

const view = (r: GenerateResult) => r.tokens.map((t) => ({ id: t.id, logprob: t.logprob }));

const request = (q: string, i: number) => ({
  promptIds: prompt(q),
  maxTokens: 8,
  temperature: 0.9,
  seed: 100 + i,
  ignoreEos: true,
});

async function run(gen: Generator, concurrent: boolean) {
  if (concurrent) return Promise.all(QUESTIONS.map((q, i) => gen.generate(request(q, i))));
  const out: GenerateResult[] = [];
  for (const [i, q] of QUESTIONS.entries()) out.push(await gen.generate(request(q, i)));
  return out;
}

/** Each request alone on a fresh generator without a cache: nothing shared, nothing reused. */
async function alone(m: PretrainedModel) {
  const out: GenerateResult[] = [];
  for (const [i, q] of QUESTIONS.entries())
    out.push(await new Generator(m, tokenizer, { prefixCache: false }).generate(request(q, i)));
  return out;
}

function expectSameResults(a: GenerateResult[], b: GenerateResult[]) {
  expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
  a.forEach((r, i) => {
    view(r).forEach((t, j) => {
      expect(Math.abs(t.logprob - (view(b[i] as GenerateResult)[j]?.logprob as number))).toBeLessThan(1e-5);
    });
  });
}

describe("Generator prefix cache", () => {
  it("sampled tokens and log-probs equal the uncached Generator's; later requests skip the preamble", async () => {
    expect(PREAMBLE.length).toBeGreaterThanOrEqual(48);
    const m = applyLora(model(3), { rank: 2, seed: 1 });
    for (const w of m.lora?.weights.values() ?? [])
      w.b.assign(tf.randomNormal(w.b.shape, 0, 0.3, "float32", 5));
    try {
      const reference = await alone(m);
      // Without a cache, requests admitted together still share work: the preamble runs once and the
      // two identical prompts are computed once.
      const together = new Generator(m, tokenizer, { prefixCache: false });
      expectSameResults(await run(together, true), reference);
      for (const concurrent of [false, true]) {
        const cached = new Generator(m, tokenizer);
        const first = await run(cached, concurrent);
        const again = await run(cached, concurrent);
        expectSameResults(first, reference);
        expectSameResults(again, reference);
        const stats = cached.prefixCacheStats;
        expect(together.prefixCacheStats).toBeNull();
        // Sequentially every request after the first reuses at least the preamble's whole blocks; the
        // second round reuses even when all four are admitted together.
        expect(stats?.hits).toBeGreaterThanOrEqual(concurrent ? 4 : 7);
        expect(stats?.reusedTokens).toBeGreaterThanOrEqual((stats?.hits ?? 0) * 48);
      }
    } finally {
      m.dispose();
    }
  });

  it("eviction keeps the cache within maxBytes, least recently used first, and frees its tensors", () => {
    const m = model(4);
    try {
      // Warm the model's causal-mask cache first, so the tensor count below measures the prefix cache only.
      for (const kv of m.prefillMany([Array.from({ length: 33 }, () => 1)]).cache) tf.dispose([kv.k, kv.v]);
      const before = tf.memory().numTensors;
      // One 32-token prefix of this model: 2 layers x (k + v) x 1 x 2 kv-heads x 32 x head_dim floats.
      const probe = new PrefixCache({ blockSize: 16 });
      const ids = (seed: number) => Array.from({ length: 33 }, (_, t) => 1 + ((seed * 7 + t * 3) % 40));
      const insert = (c: PrefixCache, p: number[], scope?: string) => {
        const { cache } = m.prefillMany([p]);
        c.insert(p, cache, 0, scope);
        for (const kv of cache) tf.dispose([kv.k, kv.v]);
      };
      insert(probe, ids(0));
      const entryBytes = probe.bytes;
      expect(entryBytes).toBeGreaterThan(0);
      probe.clear();
      const cache = new PrefixCache({ blockSize: 16, maxBytes: 2.5 * entryBytes });
      insert(cache, ids(1));
      insert(cache, ids(2));
      expect(cache.match(ids(1))?.length).toBe(32); // touch 1: now 2 is the least recently used
      insert(cache, ids(3));
      expect(cache.bytes).toBeLessThanOrEqual(cache.maxBytes);
      expect(cache.getStats()).toMatchObject({ entries: 2, evictions: 1 });
      expect(cache.match(ids(2))).toBeNull();
      expect(cache.match(ids(1))?.length).toBe(32);
      expect(cache.match(ids(3))?.length).toBe(32);
      for (let s = 4; s < 20; s++) {
        insert(cache, ids(s));
        expect(cache.bytes).toBeLessThanOrEqual(cache.maxBytes);
      }
      // A prefix the cache already holds is not stored twice; a longer one replaces the shorter.
      const n = cache.getStats().entries;
      insert(cache, ids(19));
      expect(cache.getStats().entries).toBe(n);
      // Another scope (another adapter's keys/values) never matches, even for the same tokens.
      expect(cache.match(ids(19), "other-adapter")).toBeNull();
      const scoped = cache.getStats().entries;
      insert(cache, ids(19), "other-adapter");
      expect(cache.getStats().entries).toBeGreaterThan(scoped - 1);
      expect(cache.match(ids(19), "other-adapter")?.length).toBe(32);
      cache.clear();
      expect(tf.memory().numTensors).toBe(before);
    } finally {
      m.dispose();
    }
  });

  it("a weight swap, and an in-place weight change nobody announced, invalidate the cache", async () => {
    const m = model(5);
    const other = model(6);
    try {
      const cached = new Generator(m, tokenizer);
      await run(cached, false);
      expect(cached.prefixCacheStats?.entries).toBeGreaterThan(0);
      await cached.swapWeights(other);
      expect(cached.prefixCacheStats?.entries).toBe(0);
      expectSameResults(
        await run(cached, false),
        await run(new Generator(m, tokenizer, { prefixCache: false }), false),
      );
      // A direct assign (as a worker receiving broadcast weights does) changes the weights' buffers.
      const w = m.variable("model.layers.0.mlp.down_proj.weight");
      w.assign(tf.mul(w, 1.5));
      const after = await run(cached, false);
      expectSameResults(after, await alone(m));
    } finally {
      m.dispose();
      other.dispose();
    }
  });
});
