import { ChatTemplate, Tokenizer } from "@agl/trainer-gpu";
import { describe, expect, it } from "vitest";
import { calculate } from "./calculator.js";
import {
  alphabet,
  demonstrations,
  expressionOf,
  freshProblems,
  makeSplits,
  problemKey,
  vocabulary,
} from "./dataset.js";

describe("calc-agent dataset", () => {
  const splits = makeSplits({ train: 300, demo: 200, val: 50, test: 50 }, 3);

  it("keeps held-out problems and their commuted twins out of every other split", () => {
    // Independent of problemKey: a held-out a+b or a*b also rules out b+a / b*a elsewhere.
    const forms = (p: { op: string; a: number; b: number }) =>
      p.op === "-" ? [`${p.a}-${p.b}`] : [`${p.a}${p.op}${p.b}`, `${p.b}${p.op}${p.a}`];
    const all = [...splits.train, ...splits.demo, ...splits.val, ...splits.test];
    const owners = new Map<string, string>();
    for (const p of all) {
      for (const f of forms(p)) {
        const prev = owners.get(f);
        expect(prev === undefined || prev === p.id, `${f}: ${prev} and ${p.id}`).toBe(true);
        owners.set(f, p.id);
      }
    }
    expect(new Set(splits.test.map((p) => p.id)).size).toBe(50);
    expect(problemKey({ op: "+", a: 48, b: 37 })).toBe(problemKey({ op: "+", a: 37, b: 48 }));
    expect(problemKey({ op: "-", a: 48, b: 37 })).not.toBe(problemKey({ op: "-", a: 37, b: 48 }));
  });

  it("answers agree with the calculator and every character is in the alphabet", () => {
    const chars = new Set(alphabet([...splits.train, ...splits.val]));
    for (const p of [...splits.train, ...splits.val]) {
      expect(calculate(expressionOf(p))).toBe(p.answer);
      for (const ch of p.question) expect(chars.has(ch), ch).toBe(true);
    }
  });

  it("the vocabulary makes every operand and answer one token, and demonstrations round-trip", () => {
    const all = [...splits.train, ...splits.demo, ...splits.val, ...splits.test];
    const tok = new Tokenizer(vocabulary(all));
    const template = new ChatTemplate(tok);
    for (const p of all) {
      for (const n of [p.a, p.b, p.answer]) expect(tok.encode(String(n))).toHaveLength(1);
    }
    for (const d of demonstrations(splits.demo, 0.5, 2)) {
      const enc = template.encodeChat(d.messages as never, d.tools as never, { addGenerationPrompt: false });
      expect(enc.ids).not.toContain(tok.unkId);
      expect(enc.ids.length).toBeLessThanOrEqual(72);
      const last = d.messages.at(-1)!.content as string;
      expect(tok.decode(enc.ids)).toContain(last);
    }
  });

  it("fresh problems come from their own seed and stay outside every split", () => {
    const fresh = freshProblems(splits, 100, 77);
    const taken = new Set([...splits.train, ...splits.demo, ...splits.val, ...splits.test].map(problemKey));
    expect(fresh.filter((p) => taken.has(problemKey(p)))).toEqual([]);
    expect(new Set(fresh.map(problemKey)).size).toBe(100);
    expect(freshProblems(splits, 100, 77)).toEqual(fresh);
  });

  it("is deterministic for a seed", () => {
    expect(makeSplits({ train: 5, demo: 5, val: 5, test: 5 }, 9)).toEqual(
      makeSplits({ train: 5, demo: 5, val: 5, test: 5 }, 9),
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
