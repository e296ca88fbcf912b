import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fullShareAt, mixRows } from "./row-mix.js";

describe("mixed short/full-row curriculum", () => {
  it("moves the full-row share linearly from start to end over the short phase's chunks", () => {
    const mix = { shortSteps: 300, fullShare: 0.25, fullShareEnd: 0.5 };
    const shares = [0, 25, 150, 275].map((s) => fullShareAt(mix, s, 25));
    expect(shares[0]).toBeCloseTo(0.25, 12);
    expect(shares[1]).toBeCloseTo(0.25 + 0.25 / 11, 12);
    expect(shares[2]).toBeCloseTo(0.25 + (0.25 * 150) / 275, 12);
    // The last chunk (starting at shortSteps - every) trains at the end share, and it holds beyond.
    expect(shares[3]).toBeCloseTo(0.5, 12);
    expect(fullShareAt(mix, 400, 25)).toBeCloseTo(0.5, 12);
    expect(fullShareAt({ shortSteps: 40, fullShare: 0.3, fullShareEnd: 0.3 }, 0, 40)).toBe(0.3);
  });

  it("adds full rows for the requested share in expectation, from a window that rotates with the step", () => {
    const short = Array.from({ length: 300 }, (_, i) => `s${i}`);
    const full = Array.from({ length: 300 }, (_, i) => `f${i}`);
    expect(mixRows(short, full, 0, 0, 32)).toEqual(short);
    const a = mixRows(short, full, 0.25, 0, 32);
    expect(a.slice(0, 300)).toEqual(short);
    expect(a.slice(300)).toEqual(full.slice(0, 100)); // 100 / 400 = 25%
    const b = mixRows(short, full, 0.25, 9, 32); // starts at 9 * 32 = 288 and wraps
    expect(b.slice(300)).toEqual([...full.slice(288), ...full.slice(0, 88)]);
    // A share asking for more full rows than exist takes each once.
    expect(mixRows(short, full, 0.9, 0, 32).length).toBe(600);
    expect(() => mixRows(short, full, 1, 0, 32)).toThrow(RangeError);
    expect(() => mixRows(short, full, Number.NaN, 0, 32)).toThrow(RangeError);
  });

  it("keeps every short row, never repeats a full row, and hits the share within one row", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 1, max: 200 }),
        fc.double({ min: 0, max: 0.9, noNaN: true }),
        fc.nat(1000),
        (ns, nf, share, step) => {
          const short = Array.from({ length: ns }, (_, i) => -1 - i);
          const full = Array.from({ length: nf }, (_, i) => i);
          const rows = mixRows(short, full, share, step, 32);
          const fulls = rows.filter((r) => r >= 0);
          expect(rows.filter((r) => r < 0)).toEqual(short);
          expect(new Set(fulls).size).toBe(fulls.length);
          const want = Math.min(nf, (share / (1 - share)) * ns);
          expect(Math.abs(fulls.length - want)).toBeLessThanOrEqual(0.5 + 1e-9);
        },
      ),
    );
  });
});
