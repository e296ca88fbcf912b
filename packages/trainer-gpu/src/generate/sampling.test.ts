import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createRng, logSoftmax, sampleToken, topLogprobs } from "./sampling.js";

/** Sampling without sorting the vocabulary: the same distributions and kept sets as a full sort. */

describe("sampleToken", () => {
  it("draws from softmax(logits / temperature): empirical frequencies match", () => {
    const logits = Array.from({ length: 40 }, (_, i) => Math.sin(i * 1.7) * 2);
    for (const temperature of [1, 0.5]) {
      const p = Array.from(logSoftmax(logits, temperature), Math.exp);
      const counts = new Array<number>(logits.length).fill(0);
      const rng = createRng(7);
      const draws = 40_000;
      for (let i = 0; i < draws; i++) {
        const s = sampleToken(logits, { temperature, topK: 0, topP: 1 }, rng);
        counts[s.id] = (counts[s.id] as number) + 1;
        if (i < 50) expect(s.samplingLogprob).toBeCloseTo(Math.log(p[s.id] as number), 9);
      }
      for (let id = 0; id < logits.length; id++)
        expect(Math.abs((counts[id] as number) / draws - (p[id] as number))).toBeLessThan(0.01);
    }
  });

  it("top-k and top-p keep the most likely tokens, ties going to the lower id, renormalised", () => {
    // Three tokens tie for the top: top-k 2 keeps ids 0 and 2 (the lower ids among the tie).
    const logits = [2, 0, 2, 2, -1];
    const seen = new Set<number>();
    const rng = createRng(3);
    for (let i = 0; i < 500; i++) {
      const s = sampleToken(logits, { temperature: 1, topK: 2, topP: 1 }, rng);
      seen.add(s.id);
      expect(s.samplingLogprob).toBeCloseTo(Math.log(0.5), 9);
    }
    expect([...seen].sort()).toEqual([0, 2]);
    // top-p 0.9 over p ~ [.32,.04,.32,.32,.02]: the three tied tokens hold 0.95, so exactly they remain.
    seen.clear();
    for (let i = 0; i < 500; i++)
      seen.add(sampleToken(logits, { temperature: 1, topK: 0, topP: 0.9 }, rng).id);
    expect([...seen].sort()).toEqual([0, 2, 3]);
    // Greedy: the first maximum.
    expect(sampleToken(logits, { temperature: 0, topK: 0, topP: 1 }, rng).id).toBe(0);
  });

  it("the same seed gives the same tokens (the draw depends only on the row and the seed)", () => {
    const logits = Float32Array.from({ length: 5000 }, (_, i) => Math.cos(i * 0.37) * 3);
    const run = () => {
      const rng = createRng(11);
      return Array.from(
        { length: 20 },
        () => sampleToken(logits, { temperature: 0.8, topK: 50, topP: 0.95 }, rng).id,
      );
    };
    expect(run()).toEqual(run());
  });
});

/** The untruncated and greedy draws as sampling.ts computed them before its fast path: full log-softmax arrays. */
function referenceDraw(logits: Float32Array, temperature: number, rng: () => number) {
  const parts = (t: number) => {
    const out = Array.from(logits, (v) => v / t);
    const max = Math.max(...out);
    const weights = out.map((v) => Math.exp(v - max));
    let sum = 0;
    for (const w of weights) sum += w;
    const lse = max + Math.log(sum);
    return { logprobs: out.map((v) => v - lse), weights, total: sum };
  };
  const raw = parts(1).logprobs;
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < raw.length; i++) if ((raw[i] as number) > (raw[best] as number)) best = i;
    return { id: best, logprob: raw[best], samplingLogprob: 0 };
  }
  const scaled = parts(temperature);
  const u = rng() * scaled.total;
  let acc = 0;
  let id = -1;
  for (let i = 0; i < scaled.weights.length; i++) {
    const w = scaled.weights[i] as number;
    if (w === 0) continue;
    id = i;
    acc += w;
    if (u < acc) break;
  }
  return { id, logprob: raw[id], samplingLogprob: scaled.logprobs[id] };
}

describe("untruncated sampling without materialised log-softmax", () => {
  it("draws the same tokens with the same log-probs as the full log-softmax, bit for bit", () => {
    fc.assert(
      fc.property(
        fc.array(fc.float({ min: -30, max: 30, noNaN: true }), { minLength: 1, maxLength: 300 }),
        fc.constantFrom(0, 0.7, 1, 1.3),
        fc.integer({ min: 0, max: 2 ** 31 }),
        (xs, temperature, seed) => {
          const logits = Float32Array.from(xs);
          const [a, b] = [createRng(seed), createRng(seed)];
          for (let k = 0; k < 3; k++) {
            const topK = k === 2 ? logits.length : 0;
            expect(sampleToken(logits, { temperature, topK, topP: 1 }, a)).toEqual(
              referenceDraw(logits, temperature, b),
            );
          }
        },
      ),
      { numRuns: 300, seed: 28 },
    );
  });
});

describe("topLogprobs", () => {
  it("equals a stable full sort of the log-probs", () => {
    const logits = Array.from({ length: 300 }, (_, i) => Math.round(Math.sin(i * 0.91) * 6) / 2);
    const raw = logSoftmax(logits);
    const full = Array.from(raw, (logprob, id) => ({ id, logprob })).sort((a, b) => b.logprob - a.logprob);
    for (const k of [1, 5, 20]) expect(topLogprobs(logits, k)).toEqual(full.slice(0, k));
    expect(topLogprobs(logits, 0)).toEqual([]);
  });
});
