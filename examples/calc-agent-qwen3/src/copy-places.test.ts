import { describe, expect, it } from "vitest";
import { placeAccuracy } from "./copy-places.js";

const row = (spec: Array<[string, 0 | 1, boolean]>) => ({
  pieces: spec.map((s) => s[0]),
  mask: spec.map((s) => s[1]),
  hit: spec.map((s) => s[2]),
});

describe("digit accuracy by place", () => {
  it("splits the assistant's numbers into first and later digits and by length", () => {
    const rows = [
      row([
        // The user's digits (mask 0) do not count.
        ["4", 0, false],
        ["2", 0, false],
        [" is", 1, true],
        // 123: first digit missed, later two hit.
        ["1", 1, false],
        ["2", 1, true],
        ["3", 1, true],
        [",", 1, true],
        // 7: a one-digit number, hit.
        ["7", 1, true],
      ]),
      // Two numbers split by the end of a reply (mask gap): 45 then 6.
      row([
        ["4", 1, true],
        ["5", 1, false],
        ["<|im_end|>", 0, true],
        ["6", 1, false],
      ]),
    ];
    const p = placeAccuracy(rows);
    // First digits: 1 (miss), 7 (hit), 4 (hit), 6 (miss); later: 2, 3 (hits), 5 (miss).
    expect(p.firstDigit).toBeCloseTo(2 / 4, 12);
    expect(p.laterDigits).toBeCloseTo(2 / 3, 12);
    // Length 1: 7 hit, 6 miss; length 2: 4 hit, 5 miss; length 3: 1 miss, 2 and 3 hit.
    expect(p.byLength).toEqual([0.5, 0.5, 2 / 3]);
  });

  it("is zero, not NaN, with no digits", () => {
    expect(placeAccuracy([row([["a", 1, true]])])).toEqual({ firstDigit: 0, laterDigits: 0, byLength: [] });
  });
});
