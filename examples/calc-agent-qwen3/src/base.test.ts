import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ChatMessage, HfChatTemplate, type ToolDefinition } from "@agl/trainer-gpu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { baseTokenizer, CHECKPOINT_FILES } from "./base.js";
import { baseCorpus } from "./base-corpus.js";
import { MODEL_SHAPE, taskTexts, writeInitialCheckpoint } from "./checkpoint.js";
import { assistantDigitAccuracy } from "./copy-accuracy.js";
import { createPolicy } from "./experiment.js";
import { asHfTokenizer, qwen3TokenizerFiles, type TrimmedTokenizer } from "./qwen-tokenizer.js";

let tok: TrimmedTokenizer;
let dir: string;
beforeAll(async () => {
  tok = baseTokenizer();
  dir = await mkdtemp(join(tmpdir(), "calc-base-test-"));
}, 300_000);
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the base's tokenizer (the real Qwen3 tokenizer trimmed to the task and the base corpus)", () => {
  it("gives the full tokenizer's token strings on the task's texts and on corpus chats it was not trimmed on", () => {
    const full = asHfTokenizer(qwen3TokenizerFiles());
    const trimmed = asHfTokenizer(tok);
    const template = new HfChatTemplate(full);
    const unseen = [...baseCorpus(60, 424_242), ...baseCorpus(60, 424_243, { freeText: 1 })].map((d) =>
      template.render(d.messages as ChatMessage[], d.tools as ToolDefinition[], {
        addGenerationPrompt: false,
      }),
    );
    const strings = (t: typeof full, text: string) =>
      t.encode(text).map((id) => t.decode([id], { skipSpecialTokens: false }));
    for (const text of [...taskTexts(), ...unseen])
      expect(strings(trimmed, text)).toEqual(strings(full, text));
    // Trimmed, not the whole vocabulary, and every kept id maps to the same token string in the full one.
    expect(tok.originalIds.length).toBeLessThan(2000);
    tok.originalIds.slice(0, 300).forEach((orig, id) => {
      expect(trimmed.decode([id], { skipSpecialTokens: false })).toBe(
        full.decode([orig], { skipSpecialTokens: false }),
      );
    });
  });
});

describe("starting the job from a base (createPolicy with a checkpoint folder)", () => {
  it("copies the base's files to <out>/initial byte for byte and loads them", async () => {
    const base = join(dir, "base");
    await writeInitialCheckpoint(base, 3, MODEL_SHAPE, { tokenizer: tok, name: "calc-agent-qwen3-base" });
    const policy = await createPolicy(join(dir, "initial"), 9, base);
    try {
      for (const f of CHECKPOINT_FILES) {
        expect(await readFile(join(dir, "initial", f))).toEqual(await readFile(join(base, f)));
      }
      expect(policy.tokenizer.vocabSize).toBe(tok.originalIds.length);
      // An untrained model does not copy: the measure the pretraining run logs is not trivially high.
      const acc = assistantDigitAccuracy(policy.model, policy.template, baseCorpus(4, 5));
      expect(acc).toBeLessThan(0.5);
    } finally {
      policy.model.dispose();
    }
  }, 300_000);
});
