import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { mkSpan } from "../../../adapter/src/test-helpers.js";
import { buildSpanTimeline } from "./span-tree.js";

let seq = 0;
const span = (
  id: string,
  parent: string | null,
  start: number,
  end: number | null,
  name = id,
  attributes = {},
) => mkSpan({ id, parent, start, end, name, attributes, seq: ++seq });

describe("buildSpanTimeline", () => {
  it("indents by depth, orders children by start time and places bars on the rollout's time span", () => {
    const spans = [
      span("root", null, 100, 110),
      span("late", "root", 105, 109),
      span("early", "root", 101, 103),
      span("leaf", "early", 101.5, 102),
    ];
    const t = buildSpanTimeline(spans);
    expect(t.rows.map((r) => [r.name, r.depth])).toEqual([
      ["root", 0],
      ["early", 1],
      ["leaf", 2],
      ["late", 1],
    ]);
    expect(t.durationSeconds).toBe(10);
    const late = t.rows.find((r) => r.name === "late")!;
    expect(late.offset).toBeCloseTo(0.5);
    expect(late.width).toBeCloseTo(0.4);
    expect(late.durationSeconds).toBe(4);
    expect(t.rows[0]!.childCount).toBe(2);
  });

  it("shows a referenced-but-missing parent as a virtual row and several roots side by side", () => {
    const t = buildSpanTimeline([span("a", null, 0, 1), span("b", "missing", 2, 3), span("c", null, 4, 5)]);
    expect(t.rows.map((r) => [r.name, r.depth, r.virtual])).toEqual([
      ["a", 0, false],
      ["agentlightning.virtual", 0, true],
      ["b", 1, false],
      ["c", 0, false],
    ]);
  });

  it("marks reward spans with their value and copes with open spans and no spans", () => {
    const t = buildSpanTimeline([
      span("r", null, 0, 1, "agentlightning.annotation", { "agentlightning.reward.0.value": 0.5 }),
      span("open", null, 0.5, null),
    ]);
    expect(t.rows.find((r) => r.name === "agentlightning.annotation")!.reward).toBe(0.5);
    const open = t.rows.find((r) => r.name === "open")!;
    expect(open.durationSeconds).toBeNull();
    expect(open.width).toBe(0);
    expect(buildSpanTimeline([])).toEqual({
      rows: [],
      startTime: null,
      endTime: null,
      durationSeconds: null,
    });
  });

  it("every span gets one row and every bar stays inside the timeline (property)", () => {
    const node = fc.record({
      parent: fc.option(fc.nat(30), { nil: null }),
      start: fc.double({ min: 0, max: 100, noNaN: true }),
      length: fc.option(fc.double({ min: 0, max: 10, noNaN: true }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(node, { minLength: 1, maxLength: 30 }), (nodes) => {
        const spans = nodes.map((n, i) =>
          span(
            `s${i}`,
            n.parent === null ? null : `s${n.parent}`,
            n.start,
            n.length === null ? null : n.start + n.length,
          ),
        );
        const t = buildSpanTimeline(spans);
        expect(t.rows.filter((r) => !r.virtual)).toHaveLength(spans.length);
        for (const r of t.rows) {
          expect(r.offset).toBeGreaterThanOrEqual(0);
          expect(r.offset + r.width).toBeLessThanOrEqual(1 + 1e-9);
        }
      }),
      { numRuns: 200 },
    );
  });
});
