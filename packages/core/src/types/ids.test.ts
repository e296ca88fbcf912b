import { describe, expect, it } from "vitest";
import { newAttemptId, newResourcesId, newRolloutId, newSpanId, newTraceId } from "./ids.js";

describe("ids", () => {
  it("have the reference's shapes", () => {
    expect(newRolloutId()).toMatch(/^ro-[0-9a-f]{12}$/);
    expect(newAttemptId()).toMatch(/^at-[0-9a-f]{8}$/);
    expect(newResourcesId()).toMatch(/^rs-[0-9a-f]{12}$/);
    expect(newTraceId()).toMatch(/^[0-9a-f]{32}$/);
    expect(newSpanId()).toMatch(/^[0-9a-f]{16}$/);
  });

  it("are distinct and uniformly random across many refills of the pool", () => {
    const ids = Array.from({ length: 20_000 }, newRolloutId);
    expect(new Set(ids).size).toBe(ids.length);
    const counts = new Map<string, number>();
    for (const id of ids) for (const ch of id.slice(3)) counts.set(ch, (counts.get(ch) ?? 0) + 1);
    // 240,000 digits: each of the 16 within 5% of its share (a 12-sigma band for a fair source).
    expect(counts.size).toBe(16);
    for (const n of counts.values()) expect(Math.abs(n / 15_000 - 1)).toBeLessThan(0.05);
  });
});
