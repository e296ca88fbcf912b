import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { batches, meanReward, sample, sampleParents, selectBeam } from "./beam.js";

/** A deterministic random source from a fast-check seed (a small LCG is enough for shuffling tests). */
const lcg = (seed: number) => {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
};

describe("sampleParents", () => {
  it("repeats every member in turn while the beam is smaller than the width", () => {
    expect(sampleParents(["v0"], 3, Math.random)).toEqual(["v0", "v0", "v0"]);
    expect(sampleParents(["a", "b"], 5, Math.random)).toEqual(["a", "b", "a", "b", "a"]);
    expect(sampleParents([], 3, Math.random)).toEqual([]);
  });

  it("draws width distinct members once the beam is large enough (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 8 }),
        fc.integer(),
        (width, extra, seed) => {
          const beam = Array.from({ length: width + extra }, (_, i) => `v${i}`);
          const parents = sampleParents(beam, width, lcg(seed));
          expect(parents).toHaveLength(width);
          expect(new Set(parents).size).toBe(width);
          for (const p of parents) expect(beam).toContain(p);
        },
      ),
    );
  });
});

describe("selectBeam", () => {
  it("keeps the best by score and prefers the earlier entry on a tie", () => {
    const pool = [
      { v: "incumbent", score: 0.5 },
      { v: "a", score: 0.75 },
      { v: "tie", score: 0.5 },
      { v: "low", score: 0.1 },
    ];
    expect(selectBeam(pool, 2).map((e) => e.v)).toEqual(["a", "incumbent"]);
    expect(selectBeam(pool, 3).map((e) => e.v)).toEqual(["a", "incumbent", "tie"]);
    expect(selectBeam(pool, 10)).toHaveLength(4);
  });

  it("matches sorting by (-score, index) (property)", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 20 }),
        fc.integer({ min: 1, max: 6 }),
        (scores, width) => {
          const pool = scores.map((score, i) => ({ i, score }));
          const expected = [...pool].sort((a, b) => b.score - a.score || a.i - b.i).slice(0, width);
          expect(selectBeam(pool, width)).toEqual(expected);
        },
      ),
    );
  });
});

describe("batches", () => {
  it("yields the whole dataset reshuffled when the batch is at least its size", () => {
    const it = batches([1, 2, 3], 5, lcg(7));
    for (let i = 0; i < 3; i++) expect([...it.next().value!].sort()).toEqual([1, 2, 3]);
  });

  it("covers each item once per pass and never repeats one within a batch (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 1, max: 11 }),
        fc.integer(),
        (n, size, seed) => {
          fc.pre(size < n);
          const data = Array.from({ length: n }, (_, i) => i);
          const it = batches(data, size, lcg(seed));
          const drawn: number[] = [];
          for (let b = 0; b < 6; b++) {
            const batch = it.next().value!;
            expect(batch).toHaveLength(size);
            expect(new Set(batch).size).toBe(size);
            drawn.push(...batch);
          }
          // Over k full passes every item is drawn k times (up to the one batch straddling a pass boundary).
          const counts = data.map((d) => drawn.filter((x) => x === d).length);
          expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(2);
        },
      ),
    );
  });

  it("refuses an empty dataset", () => {
    expect(() => batches([], 3, Math.random).next()).toThrow(RangeError);
  });
});

describe("sample and meanReward", () => {
  it("samples distinct items, all of them when asked for more", () => {
    expect(sample([1, 2, 3], 10, lcg(1)).sort()).toEqual([1, 2, 3]);
    expect(new Set(sample([1, 2, 3, 4, 5], 3, lcg(2))).size).toBe(3);
  });

  it("counts missing rewards as 0 over the whole batch", () => {
    expect(meanReward([1, null, 0.5, 0])).toBe(0.375);
    expect(meanReward([1, 1], 4)).toBe(0.5);
    expect(meanReward([])).toBe(0);
  });
});
