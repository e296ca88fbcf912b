import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { bodyNestsTooDeep, jsonNestsDeeperThan, NESTING_SCAN_MIN_LENGTH } from "./json-nesting.js";

/** Nesting depth by walking the parsed value: the independent reference. */
function parsedDepth(value: unknown): number {
  if (Array.isArray(value)) return 1 + Math.max(0, ...value.map(parsedDepth));
  if (typeof value === "object" && value !== null)
    return 1 + Math.max(0, ...Object.values(value).map(parsedDepth));
  return 0;
}

describe("jsonNestsDeeperThan", () => {
  it("agrees with the parsed value's depth, strings with brackets, quotes and escapes included", () => {
    const tricky = fc.constantFrom('"', "\\", "[", "]", "{", "}", '\\"', "\\\\", "ü", "\u2028");
    const trickyString = fc.array(tricky).map((a) => a.join(""));
    const leaf = fc.oneof(fc.string(), trickyString, fc.integer(), fc.boolean(), fc.constant(null));
    const { value } = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        leaf,
        fc.array(tie("value"), { maxLength: 3 }),
        fc.dictionary(trickyString, tie("value"), { maxKeys: 3 }),
      ),
    }));
    fc.assert(
      fc.property(value, fc.integer({ min: 0, max: 8 }), (v, max) => {
        const text = JSON.stringify(v);
        const depth = parsedDepth(v);
        expect(jsonNestsDeeperThan(text, max)).toBe(depth > max);
        expect(jsonNestsDeeperThan(Buffer.from(text, "utf8"), max)).toBe(depth > max);
      }),
      { numRuns: 500 },
    );
  });

  it("finds a 30 MB body of nested arrays over the limit in one pass, without parsing it", () => {
    const half = 15 * 1024 * 1024;
    const text = "[".repeat(half) + "]".repeat(half);
    const before = process.memoryUsage().heapUsed;
    expect(jsonNestsDeeperThan(text, 128)).toBe(true);
    expect(bodyNestsTooDeep(Buffer.from(text), 128)).toBe(true);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 * 1024 * 1024);
  });

  it("bodies under the scan threshold are not scanned", () => {
    const deep = "[".repeat(1000) + "]".repeat(1000);
    expect(deep.length).toBeLessThan(NESTING_SCAN_MIN_LENGTH);
    expect(bodyNestsTooDeep(deep, 128)).toBe(false);
    expect(jsonNestsDeeperThan(deep, 128)).toBe(true);
    const padded = `{"pad":"${"x".repeat(NESTING_SCAN_MIN_LENGTH)}","v":${deep}}`;
    expect(bodyNestsTooDeep(padded, 128)).toBe(true);
    expect(bodyNestsTooDeep(`{"pad":"${"[".repeat(NESTING_SCAN_MIN_LENGTH)}"}`, 128)).toBe(false);
  });
});
