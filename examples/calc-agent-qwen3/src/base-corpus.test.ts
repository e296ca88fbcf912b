import { HfChatTemplate } from "@agl/trainer-gpu";
import { describe, expect, it } from "vitest";
import { BASE_TOOLS, baseCorpus } from "./base-corpus.js";
import { asHfTokenizer, qwen3TokenizerFiles } from "./qwen-tokenizer.js";

const corpus = [...baseCorpus(2000, 7), ...baseCorpus(1000, 9, { freeText: 0.5 })];
type Call = { function: { name: string; arguments: string } };
const calls = (d: (typeof corpus)[number]): Call[] =>
  d.messages.flatMap((m) => ("tool_calls" in m && m.tool_calls ? (m.tool_calls as Call[]) : []));
const text = (d: (typeof corpus)[number]) => JSON.stringify(d);

describe("base corpus", () => {
  it("is deterministic for a seed and differs across seeds", () => {
    expect(baseCorpus(50, 7)).toEqual(corpus.slice(0, 50));
    expect(baseCorpus(50, 8)).not.toEqual(corpus.slice(0, 50));
    // Without free text the chats are those the base's tokenizer was trimmed over.
    expect(baseCorpus(50, 7, { freeText: 0 })).toEqual(corpus.slice(0, 50));
    expect(baseCorpus(50, 9, { freeText: 0.5 })).toEqual(baseCorpus(50, 9, { freeText: 0.5 }));
  });

  it("holds nothing of the task: no calculator, no operator between numbers, no word problem", () => {
    const template = new HfChatTemplate(asHfTokenizer(qwen3TokenizerFiles()));
    for (const d of [...corpus.slice(0, 300), ...corpus.slice(2000, 2300)]) {
      const rendered = template.render(d.messages as never, d.tools as never, { addGenerationPrompt: false });
      expect(rendered).not.toMatch(/calculator|expr/i);
      expect(rendered).not.toMatch(/\d\s*[-+*/=x]\s*\d/);
    }
    for (const d of corpus) {
      expect(text(d)).not.toMatch(/calculator/i);
      for (const m of d.messages) {
        const content = typeof m.content === "string" ? m.content : "";
        expect(content).not.toMatch(/\d\s*[-+*/=]\s*\d/);
        // The task's word problems: buying boxes, getting more, giving away, "How many".
        expect(content).not.toMatch(/how many|boxes|\bmore\b|away|buys|gets/i);
        for (const num of content.match(/\d+/g) ?? []) expect(num.length).toBeLessThanOrEqual(4);
      }
    }
  });

  it("calls only tools of the corpus, offered in the prompt when a tools block is there", () => {
    const names = new Set(BASE_TOOLS.map((t) => t.function.name));
    let withBlock = 0;
    let withoutBlock = 0;
    for (const d of corpus) {
      for (const c of calls(d)) {
        expect(names.has(c.function.name)).toBe(true);
        expect(() => JSON.parse(c.function.arguments)).not.toThrow();
        if (d.tools.length > 0) {
          withBlock += 1;
          expect(d.tools.map((t) => (t as (typeof BASE_TOOLS)[number]).function.name)).toContain(
            c.function.name,
          );
        } else withoutBlock += 1;
      }
    }
    expect(withBlock).toBeGreaterThan(400);
    expect(withoutBlock).toBeGreaterThan(400);
    expect(new Set(corpus.flatMap((d) => calls(d).map((c) => c.function.name))).size).toBe(BASE_TOOLS.length);
  });

  it("copies: every number the assistant writes appears earlier in the chat", () => {
    let numbers = 0;
    for (const d of corpus) {
      let context = "";
      for (const m of d.messages) {
        const written =
          m.role === "assistant"
            ? `${typeof m.content === "string" ? m.content : ""} ${calls({ ...d, messages: [m] })
                .map((c) => c.function.arguments)
                .join(" ")}`
            : "";
        for (const num of written.match(/\d+/g) ?? []) {
          numbers += 1;
          expect(context).toMatch(new RegExp(`(^|\\D)${num}(\\D|$)`));
        }
        context += ` ${typeof m.content === "string" ? m.content : ""} ${written}`;
      }
    }
    expect(numbers).toBeGreaterThan(4000);
  });
});

describe("free-text chats", () => {
  const free = baseCorpus(600, 11, { freeText: 1 });
  const user = (d: (typeof free)[number]) => d.messages[0]!.content as string;

  it("state several numbers among words on several lines, then make two calls in a row", () => {
    for (const d of free) {
      expect(user(d).split("\n").length).toBe(5);
      expect((user(d).match(/\d+/g) ?? []).length).toBeGreaterThanOrEqual(4);
      expect(calls(d)).toHaveLength(2);
      expect(d.messages.map((m) => m.role)).toEqual([
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
      ]);
    }
  });

  it("copy the first value from the user turn and the second from it or from the first tool's result", () => {
    const sources = { user: 0, tool: 0 };
    const places = new Set<number>();
    for (const d of free) {
      const [a, b] = calls(d).map((c) => Object.values(JSON.parse(c.function.arguments) as object)[0]);
      const numbers = user(d).match(/[a-z]*\d+/g)!;
      expect(numbers).toContain(String(a));
      places.add(numbers.indexOf(String(a)));
      const result = (d.messages[2]!.content as string).split(" ").at(-1);
      if (String(b) === result) sources.tool += 1;
      else {
        expect(numbers).toContain(String(b));
        sources.user += 1;
      }
    }
    // Both sources are common, and the value to copy is found by what it is, not by where it stands.
    expect(sources.user).toBeGreaterThan(100);
    expect(sources.tool).toBeGreaterThan(100);
    expect(places.size).toBeGreaterThanOrEqual(4);
  });
});
