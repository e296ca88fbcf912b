import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { STEP_INCREMENTS, stepLabel, tickLabels, yRange } from "./chart-axes.js";

describe("chart axes", () => {
  it("a nearly flat series gets distinct tick labels (not five times 4.676)", () => {
    const ticks = [4.6761, 4.67615, 4.6762, 4.67625, 4.6763];
    const labels = tickLabels(ticks);
    expect(new Set(labels).size).toBe(5);
    expect(labels).toEqual(["4.67610", "4.67615", "4.67620", "4.67625", "4.67630"]);
    expect(tickLabels([0, 0.5, 1, 1.5])).toEqual(["0.0", "0.5", "1.0", "1.5"]);
    // Distinct at one decimal, but 0.25 would read "0.3": labels must be true to their ticks.
    expect(tickLabels([0, 0.25, 0.5, 0.75])).toEqual(["0.00", "0.25", "0.50", "0.75"]);
    expect(tickLabels([0, 1, 2])).toEqual(["0", "1", "2"]);
    expect(tickLabels([-0.0001, 0, 0.0001])).toEqual(["-0.0001", "0.0000", "0.0001"]);
    expect(tickLabels([1e-5, 2e-5])).toEqual(["1.0e-5", "2.0e-5"]);
    expect(tickLabels([2e6, 4e6])).toEqual(["2.0e+6", "4.0e+6"]);
  });

  it("distinct values always get distinct labels (property)", () => {
    fc.assert(
      fc.property(
        fc.double({ min: -1e9, max: 1e9, noNaN: true }),
        fc.double({ min: 1e-12, max: 1e6, noNaN: true }),
        fc.integer({ min: 2, max: 8 }),
        (start, step, n) => {
          const ticks = Array.from({ length: n }, (_, i) => start + i * step);
          fc.pre(new Set(ticks).size === n);
          const labels = tickLabels(ticks);
          expect(new Set(labels).size).toBe(n);
          // Each label reads as its tick, to well within the spacing (or float64's own precision).
          labels.forEach((l, i) => {
            const bound = Math.max(step * 0.01, Math.abs(ticks[i]!) * 1e-12);
            expect(Math.abs(Number(l) - ticks[i]!)).toBeLessThanOrEqual(bound);
          });
        },
      ),
    );
  });

  it("a flat series gets a band around its value; others 5% padding", () => {
    expect(yRange(4.676, 4.676)).toEqual([4.676 - 0.2338, 4.676 + 0.2338]);
    expect(yRange(0, 0)).toEqual([-1, 1]);
    expect(yRange(0, 10)).toEqual([-0.5, 10.5]);
    expect(yRange(null, null)).toEqual([0, 1]);
  });

  it("step ticks are integers only", () => {
    expect(STEP_INCREMENTS.slice(0, 7)).toEqual([1, 2, 5, 10, 20, 50, 100]);
    expect(STEP_INCREMENTS.every(Number.isInteger)).toBe(true);
    expect([0, 0.5, 1, 2].map(stepLabel)).toEqual(["0", "", "1", "2"]);
  });
});
