import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { loadPretrainedPolicy, selectBackend } from "@agl/trainer-gpu";
import { describe, expect, it } from "vitest";
import { baseTokenizer, CHECKPOINT_FILES } from "./base.js";
import { baseCorpus } from "./base-corpus.js";
import { taskTexts } from "./checkpoint.js";
import { assistantDigitAccuracy } from "./copy-accuracy.js";
import { checkFromTokenizer } from "./pretrain-options.js";
import { asHfTokenizer, qwen3TokenizerFiles } from "./qwen-tokenizer.js";

/** The base committed under `base/` (made by src/pretrain-base.ts; how, in the README). */
const dir = fileURLToPath(new URL("../base/", import.meta.url));
const readme = fileURLToPath(new URL("../README.md", import.meta.url));

describe("the committed base", () => {
  it("has the sha256 the README gives for each checkpoint file", async () => {
    const text = await readFile(readme, "utf8");
    for (const f of CHECKPOINT_FILES) {
      const sha = createHash("sha256")
        .update(await readFile(`${dir}${f}`))
        .digest("hex");
      expect(text).toContain(`${sha}  base/${f}`);
    }
  });

  it("has the base's tokenizer, which gives the full Qwen3 tokenizer's token strings on the task's texts", async () => {
    const tok = baseTokenizer();
    await checkFromTokenizer(dir, tok);
    const full = asHfTokenizer(qwen3TokenizerFiles());
    const committed = asHfTokenizer({
      tokenizerJson: JSON.parse(await readFile(`${dir}tokenizer.json`, "utf8")),
      tokenizerConfig: JSON.parse(await readFile(`${dir}tokenizer_config.json`, "utf8")),
    });
    const strings = (t: typeof full, text: string) =>
      t.encode(text).map((id) => t.decode([id], { skipSpecialTokens: false }));
    for (const text of taskTexts()) expect(strings(committed, text)).toEqual(strings(full, text));
  }, 300_000);

  it("loads as a policy of the job's shape that copies numbers (a fresh one does not: src/base.test.ts)", async () => {
    await selectBackend();
    const policy = await loadPretrainedPolicy(dir);
    try {
      expect(policy.tokenizer.vocabSize).toBe(baseTokenizer().originalIds.length);
      expect(policy.model.parameterCount).toBe(152_000);
      // Held-out short corpus chats (a seed no run trained on): the base copies most of their digits.
      expect(assistantDigitAccuracy(policy.model, policy.template, baseCorpus(16, 31))).toBeGreaterThan(0.5);
    } finally {
      policy.model.dispose();
    }
  }, 300_000);
});
