import { describe, expect, it } from "vitest";
import { calculate } from "./calculator.js";
import {
  CALCULATOR_TOOL,
  chainedSolution,
  demonstrations,
  expressionOf,
  makeSplits,
  problemKey,
} from "./dataset.js";

describe("calc-agent dataset", () => {
  const splits = makeSplits({ train: 300, demo: 200, val: 50, test: 50 }, 3);
  const all = [...splits.train, ...splits.demo, ...splits.val, ...splits.test];

  it("keeps every problem in one split only", () => {
    // Independent of problemKey: the question without the name and the item.
    const owners = new Map<string, string>();
    for (const p of all) {
      const form = p.question.replace(/^\w+ /, "").replace(/ (pens|cups|eggs|cards|books)/, "");
      expect(owners.get(form), `${form} in ${owners.get(form)} and ${p.id}`).toBeUndefined();
      owners.set(form, p.id);
    }
    expect(new Set(all.map(problemKey)).size).toBe(all.length);
  });

  it("needs two chained operations: the second starts from the first result, and the answer agrees with the calculator", () => {
    const ops = new Set<string>();
    for (const p of all) {
      const [first, second] = p.steps;
      expect(second.a).toBe(calculate(expressionOf(first)));
      expect(calculate(expressionOf(second))).toBe(p.answer);
      // The question states the three numbers in order; the intermediate result is not among them.
      expect(p.question.match(/\d+/g)!.map(Number)).toEqual([first.a, first.b, second.b]);
      expect(p.answer).toBeGreaterThanOrEqual(10);
      ops.add(`${first.op}${second.op}`);
    }
    expect([...ops].sort()).toEqual(["*+", "*-", "+-", "-+"]);
    // Multi-digit intermediate results: copying one into the next call is copying several tokens.
    expect(all.filter((p) => p.steps[1].a >= 100).length / all.length).toBeGreaterThan(0.5);
  });

  it("offers a tool whose schema holds no number (the only numbers in a prompt are the problem's and the results)", () => {
    expect(JSON.stringify(CALCULATOR_TOOL)).not.toMatch(/\d/);
  });

  it("is deterministic for a seed", () => {
    expect(makeSplits({ train: 5, demo: 5, val: 5, test: 5 }, 9)).toEqual(
      makeSplits({ train: 5, demo: 5, val: 5, test: 5 }, 9),
    );
  });

  it("demonstrations always call for the first step and chain the second in about the requested share", () => {
    const demos = demonstrations(splits.demo, 0.25, 1);
    const chained = demos.filter((d) => d.messages.length === 6);
    expect(chained.length / demos.length).toBeGreaterThan(0.15);
    expect(chained.length / demos.length).toBeLessThan(0.35);
    for (const [i, d] of demos.entries()) {
      const p = splits.demo[i]!;
      const calls = d.messages.filter((m) => m.role === "assistant" && "tool_calls" in m && m.tool_calls);
      for (const [k, m] of calls.entries()) {
        const call = (m as { tool_calls: Array<{ function: { arguments: string } }> }).tool_calls[0]!;
        expect(JSON.parse(call.function.arguments).expr).toBe(expressionOf(p.steps[k]!));
      }
      const results = d.messages.filter((m) => m.role === "tool").map((m) => Number(m.content));
      expect(results).toEqual(p.steps.slice(0, results.length).map((s) => calculate(expressionOf(s))));
      const last = d.messages.at(-1)!.content as string;
      expect(last.endsWith(String(p.answer)) || last.endsWith(`= ${p.answer}.`)).toBe(true);
    }
    expect(chainedSolution(splits.demo[0]!).messages).toHaveLength(6);
  });
});
