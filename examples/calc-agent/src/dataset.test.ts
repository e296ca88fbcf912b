import { describe, expect, it } from "vitest";
import { calculate } from "./calculator.js";
import { alphabet, demonstrations, expressionOf, makeSplits } from "./dataset.js";

describe("calc-agent dataset", () => {
  const splits = makeSplits({ train: 300, demo: 200, val: 50 }, 3);

  it("keeps validation problems out of train and demo splits", () => {
    const key = (p: { op: string; a: number; b: number }) => `${p.op}${p.a},${p.b}`;
    const seen = new Set([...splits.train, ...splits.demo].map(key));
    expect(splits.val.filter((p) => seen.has(key(p)))).toEqual([]);
    expect(new Set(splits.val.map((p) => p.id)).size).toBe(50);
  });

  it("answers agree with the calculator and every character is in the alphabet", () => {
    const chars = new Set(alphabet([...splits.train, ...splits.val]));
    for (const p of [...splits.train, ...splits.val]) {
      expect(calculate(expressionOf(p))).toBe(p.answer);
      for (const ch of p.question) expect(chars.has(ch), ch).toBe(true);
    }
  });

  it("is deterministic for a seed", () => {
    expect(makeSplits({ train: 5, demo: 5, val: 5 }, 9)).toEqual(
      makeSplits({ train: 5, demo: 5, val: 5 }, 9),
    );
  });

  it("demonstrations use the tool in about the requested share, with correct results", () => {
    const demos = demonstrations(splits.demo, 0.25, 1);
    const withTool = demos.filter((d) => d.messages.length === 4);
    expect(withTool.length / demos.length).toBeGreaterThan(0.15);
    expect(withTool.length / demos.length).toBeLessThan(0.35);
    for (const d of withTool) {
      const call = (d.messages[1] as { tool_calls: Array<{ function: { arguments: string } }> })
        .tool_calls[0]!;
      const expr = JSON.parse(call.function.arguments).expr as string;
      expect(String(calculate(expr))).toBe(d.messages[2]!.content);
    }
  });
});
