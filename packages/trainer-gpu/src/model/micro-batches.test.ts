import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { lengthBalancedMicroBatches } from "./micro-batches.js";

const paddedSize = (lengths: readonly number[], group: readonly number[]) =>
  group.length * Math.max(...group.map((i) => lengths[i]!));

/**
 * Independent reference: the smallest possible largest padded size over every way of cutting the rows,
 * sorted by length, into at most `parts` runs (dynamic programming over cut points).
 */
function bestLargest(lengths: readonly number[], parts: number): number {
  const sorted = [...lengths].sort((a, b) => b - a);
  const n = sorted.length;
  // best[p][i]: smallest largest size covering sorted[i..] with at most p runs.
  let best = Array.from({ length: n + 1 }, (_, i) => (i === n ? 0 : Number.POSITIVE_INFINITY));
  for (let p = 1; p <= parts; p++) {
    const next = [...best];
    for (let i = n - 1; i >= 0; i--) {
      for (let j = i + 1; j <= n; j++) {
        next[i] = Math.min(next[i]!, Math.max((j - i) * sorted[i]!, best[j]!));
      }
    }
    best = next;
  }
  return best[0]!;
}

describe("lengthBalancedMicroBatches", () => {
  it("puts the long rows together and balances padded tokens (the calc-agent's SFT batch)", () => {
    // 19 tool-call demonstrations of 66 tokens and 45 direct answers of 45 tokens, interleaved.
    const lengths = Array.from({ length: 64 }, (_, i) => (i % 10 < 3 ? 66 : 45));
    const groups = lengthBalancedMicroBatches(lengths, 32);
    expect(groups).toHaveLength(2);
    const sizes = groups.map((g) => paddedSize(lengths, g));
    // Cutting in arrival order pads both halves to 66 tokens: 32 x 66 = 2112 each.
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1740);
    expect(groups[0]!.filter((i) => lengths[i] === 66)).toHaveLength(lengths.filter((l) => l === 66).length);
  });

  it("is a partition into at most ceil(n / maxRows) micro-batches with the smallest largest padded size", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 80 }), { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 12 }),
        (lengths, maxRows) => {
          const groups = lengthBalancedMicroBatches(lengths, maxRows);
          const all = groups.flat().sort((a, b) => a - b);
          expect(all).toEqual(lengths.map((_, i) => i));
          const limit = Math.ceil(lengths.length / maxRows);
          expect(groups.length).toBeLessThanOrEqual(limit);
          const largest = Math.max(...groups.map((g) => paddedSize(lengths, g)));
          expect(largest).toBe(bestLargest(lengths, limit));
          expect(largest).toBeLessThanOrEqual(maxRows * Math.max(...lengths));
          for (const g of groups) expect(g).toEqual([...g].sort((a, b) => a - b));
        },
      ),
      { numRuns: 300 },
    );
  });

  it("rejects a micro-batch size below one and returns nothing for no rows", () => {
    expect(lengthBalancedMicroBatches([], 4)).toEqual([]);
    expect(() => lengthBalancedMicroBatches([3], 0)).toThrow(RangeError);
  });
});
