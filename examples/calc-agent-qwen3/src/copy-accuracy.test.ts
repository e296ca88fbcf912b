import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadPretrainedPolicy, selectBackend } from "@agl/trainer-gpu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeInitialCheckpoint } from "./checkpoint.js";
import { copyAccuracy, digitGroups } from "./copy-accuracy.js";
import { chainedSolution, makeSplits } from "./dataset.js";

describe("copy accuracy (teacher-forced digits of two-call solutions)", () => {
  let dir: string;
  beforeAll(async () => {
    await selectBackend({ log: () => {} });
    dir = await mkdtemp(join(tmpdir(), "calc-copy-"));
    await writeInitialCheckpoint(dir, 2);
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("groups every digit of the three replies by where it is copied from", async () => {
    const policy = await loadPretrainedPolicy(dir);
    try {
      const [p] = makeSplits({ train: 0, demo: 0, val: 0, test: 1 }, 4).test;
      const d = chainedSolution(p!);
      const enc = policy.template.encodeChat(d.messages as never, d.tools as never, {
        addGenerationPrompt: false,
      });
      const pieces = enc.ids.map((id) => policy.tokenizer.decode([id], { skipSpecialTokens: false }));
      const groups = digitGroups(pieces, enc.assistantMask);
      const digits = (g: string) => pieces.filter((_, t) => groups[t] === g).join("");
      const [s1, s2] = p!.steps;
      expect(digits("first")).toBe(`${s1.a}${s1.b}`);
      expect(digits("carried")).toBe(String(s2.a));
      expect(digits("second")).toBe(String(s2.b));
      expect(digits("answer")).toBe(String(p!.answer));
      // Digits of the prompt (question, tool results) are never targets.
      for (const [t, g] of groups.entries()) if (g) expect(enc.assistantMask[t]).toBe(1);
    } finally {
      policy.model.dispose();
    }
  });

  it("rows without the tool preamble carry the same digit targets, ~150 tokens shorter", async () => {
    const policy = await loadPretrainedPolicy(dir);
    try {
      const [p] = makeSplits({ train: 0, demo: 0, val: 0, test: 1 }, 6).test;
      const d = chainedSolution(p!);
      const targets = (tools: unknown) => {
        const enc = policy.template.encodeChat(d.messages as never, tools as never, {
          addGenerationPrompt: false,
        });
        const pieces = enc.ids.map((id) => policy.tokenizer.decode([id], { skipSpecialTokens: false }));
        const groups = digitGroups(pieces, enc.assistantMask);
        return {
          length: enc.ids.length,
          digits: pieces.map((x, t) => (groups[t] ? `${groups[t]}:${x}` : "")).filter(Boolean),
          trained: pieces.filter((_, t) => enc.assistantMask[t]).join(""),
        };
      };
      const full = targets(d.tools);
      const short = targets(null);
      expect(short.digits).toEqual(full.digits);
      expect(short.trained).toBe(full.trained);
      expect(full.length - short.length).toBeGreaterThan(100);
    } finally {
      policy.model.dispose();
    }
  });

  it("an untrained model copies at about chance; the rates are shares", async () => {
    const policy = await loadPretrainedPolicy(dir);
    try {
      const val = makeSplits({ train: 0, demo: 0, val: 8, test: 0 }, 5).val;
      const acc = copyAccuracy(policy.model, policy.template, val, 4);
      const short = copyAccuracy(policy.model, policy.template, val, 4, false);
      for (const v of [...Object.values(acc), ...Object.values(short)]) {
        expect(v).toBeGreaterThanOrEqual(0);
        expect(v).toBeLessThanOrEqual(0.5);
      }
    } finally {
      policy.model.dispose();
    }
  });
});
