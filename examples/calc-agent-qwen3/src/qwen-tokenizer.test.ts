import { HfChatTemplate, type HfTokenizer } from "@agl/trainer-gpu";
import { beforeAll, describe, expect, it } from "vitest";
import { taskTexts, taskTokenizer } from "./checkpoint.js";
import { CALCULATOR_TOOL, chainedSolution, demonstrations, makeSplits } from "./dataset.js";
import { asHfTokenizer, qwen3TokenizerFiles, type TrimmedTokenizer } from "./qwen-tokenizer.js";

/** The trimmed tokenizer against the full Qwen3 tokenizer it came from, on texts it was not built from. */

let full: HfTokenizer;
let trimmed: TrimmedTokenizer;
let tok: HfTokenizer;
beforeAll(() => {
  full = asHfTokenizer(qwen3TokenizerFiles());
  trimmed = taskTokenizer();
  tok = asHfTokenizer(trimmed);
});

const strings = (t: HfTokenizer, text: string) => t.encode(text).map((id) => t.idToTokenString(id));

describe("the task's trimmed Qwen3 tokenizer", () => {
  it("gives exactly the full tokenizer's token strings on every kind of transcript of other seeds' problems", () => {
    const template = new HfChatTemplate(full);
    const texts: string[] = [];
    for (const seed of [1, 2, 3]) {
      const s = makeSplits({ train: 8, demo: 4, val: 4, test: 4 }, seed);
      const problems = [...s.train, ...s.demo, ...s.val, ...s.test];
      const demos = [...problems.map(chainedSolution), ...demonstrations(problems, 0, seed)];
      for (const d of demos) {
        texts.push(template.render(d.messages as never, d.tools as never, { addGenerationPrompt: false }));
        // Generation prompts (what the server encodes before every reply).
        texts.push(
          template.render(d.messages.slice(0, 3) as never, d.tools as never, { addGenerationPrompt: true }),
        );
      }
    }
    let tokens = 0;
    for (const text of texts) {
      const expected = strings(full, text);
      expect(strings(tok, text)).toEqual(expected);
      expect(tok.decode(tok.encode(text))).toBe(text);
      tokens += expected.length;
    }
    expect(texts).toHaveLength(240);
    expect(tokens / texts.length).toBeGreaterThan(200);
    // Ids map back to the full tokenizer's ids.
    const text = texts[0]!;
    expect(tok.encode(text).map((id) => trimmed.originalIds[id])).toEqual(full.encode(text));
  });

  it("is small, keeps all 256 bytes and every Qwen3 added token, and still encodes text outside the task", () => {
    expect(tok.vocabSize).toBeLessThan(700);
    expect(tok.vocabSize).toBe(trimmed.originalIds.length);
    const addedFull = qwen3TokenizerFiles().tokenizerJson.added_tokens.map((t) => t.content);
    expect(trimmed.tokenizerJson.added_tokens.map((t) => t.content)).toEqual(addedFull);
    for (const special of ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>"])
      expect(tok.encode(special)).toHaveLength(1);
    const odd = "Zoë owes 7€ — ok?";
    expect(tok.decode(tok.encode(odd))).toBe(odd);
    // Merges are a subset of the full list, in its order.
    const rank = new Map(
      qwen3TokenizerFiles().tokenizerJson.model.merges.map((m, i) => [Array.isArray(m) ? m.join(" ") : m, i]),
    );
    const ranks = trimmed.tokenizerJson.model.merges.map(
      (m) => rank.get(Array.isArray(m) ? m.join(" ") : m)!,
    );
    expect(ranks.every((r, i) => r !== undefined && (i === 0 || r > ranks[i - 1]!))).toBe(true);
    expect(taskTexts().length).toBeGreaterThan(100);
  });

  it("renders the calculator tool with Qwen3's own chat template", () => {
    const template = new HfChatTemplate(tok);
    const text = template.render([{ role: "user", content: "hi" }], [CALCULATOR_TOOL] as never);
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "calculator"');
    expect(text.endsWith("<|im_start|>assistant\n")).toBe(true);
    expect(trimmed.tokenizerConfig.chat_template).toBe(qwen3TokenizerFiles().tokenizerConfig.chat_template);
  });
});
