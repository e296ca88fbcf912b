import { describe, expect, it } from "vitest";
import { answerText, demonstrations, makeSplits, parseProposal, rejects } from "./task.js";

describe("two-role task", () => {
  it("splits by digit set: 480/120/120 problems, no set shared between splits, the same for every run", () => {
    const s = makeSplits();
    expect([s.train.length, s.val.length, s.test.length]).toEqual([480, 120, 120]);
    const setOf = (d: number[]) => [...d].sort().join("");
    const sets = (ps: typeof s.train) => new Set(ps.map((p) => setOf(p.digits)));
    const [train, val, test] = [sets(s.train), sets(s.val), sets(s.test)];
    expect([train.size, val.size, test.size]).toEqual([80, 20, 20]);
    for (const x of test) expect(train.has(x) || val.has(x)).toBe(false);
    for (const x of val) expect(train.has(x)).toBe(false);
    for (const p of [...s.train, ...s.test]) {
      expect(new Set(p.digits).size).toBe(3);
      expect(p.answer).toBe(Math.max(...p.digits));
    }
    expect(makeSplits()).toEqual(s);
  });

  it("reads replies as the agent must: past Qwen3's think block, stray tags, and only an explicit no rejects", () => {
    expect(answerText("<think>\n\n</think>\n\n8")).toBe("8");
    expect(answerText("<think>\n\n</think>\n\n</think>\n\n6")).toBe("6");
    expect(answerText("<think>\n\n0")).toBe("0");
    expect(parseProposal("<think>\n\n</think>\n\n7 is largest")).toBe(7);
    expect(parseProposal("none")).toBeNull();
    expect(rejects("<think>\n\n</think>\n\nno")).toBe(true);
    expect(rejects("No.")).toBe(true);
    expect(rejects("<think>\n\n</think>\n\nyes")).toBe(false);
    expect(rejects("nothing")).toBe(false);
    expect(rejects("")).toBe(false);
  });

  it("warm-up demonstrations are right at the configured rates and name only the problem's digits", () => {
    const problems = makeSplits().train;
    const demos = demonstrations(problems, { n: 8000, writerSkill: 0.75, checkerSkill: 0.6, seed: 3 });
    let writerRight = 0;
    let writerN = 0;
    let checkerRight = 0;
    let checkerN = 0;
    for (const d of demos) {
      const first = d.messages[0]!.content;
      const last = d.messages.at(-1)!.content;
      const digits = [...first.matchAll(/\d/g)].map((m) => Number(m[0]));
      if (first.startsWith("Which")) {
        const max = Math.max(...digits);
        expect(digits).toContain(Number(last));
        writerN++;
        if (Number(last) === max) writerRight++;
      } else {
        const [proposal, ...three] = digits;
        const right = proposal === Math.max(...three);
        checkerN++;
        if ((last === "yes") === right) checkerRight++;
      }
    }
    expect(checkerN).toBe(2000);
    expect(Math.abs(writerRight / writerN - 0.75)).toBeLessThan(0.03);
    expect(Math.abs(checkerRight / checkerN - 0.6)).toBeLessThan(0.04);
  });
});
