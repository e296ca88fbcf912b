import { InvalidArgumentError } from "@agl/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ChatTemplate } from "./chat-template.js";
import type { ChatMessage } from "./messages.js";
import { Tokenizer } from "./tokenizer.js";
import { parseToolCalls, renderToolCallBody } from "./tool-calls.js";

const tok = new Tokenizer();
const template = new ChatTemplate(tok);
const tools = [
  {
    type: "function" as const,
    function: {
      name: "calculator",
      description: "math",
      parameters: { type: "object", properties: { expression: { type: "string" } } },
    },
  },
];

describe("Tokenizer", () => {
  it("round-trips printable text and keeps specials out of plain text", () => {
    const text = 'Hello, world!\n\t{"a": [1, 2]} ~`';
    expect(tok.decode(tok.encode(text))).toBe(text);
    // Literal special-token text in user content is encoded as characters, never as the special id.
    const ids = tok.encode("<eos>");
    expect(ids).toHaveLength(5);
    expect(ids).not.toContain(tok.eosId);
    expect(tok.encode("é")).toEqual([tok.unkId]);
    expect(tok.vocabSize).toBeLessThan(120);
  });

  describe("with pieces", () => {
    const numbers = Array.from({ length: 990 }, (_, i) => String(i + 10));
    const pieced = new Tokenizer({ pieces: [...numbers, "calculator", "calc", "is", "It"] });
    it("matches the longest piece first and round-trips any printable text (property)", () => {
      const ids = pieced.encode("It is 123+4567; calculator calc");
      expect(ids.map((id) => pieced.tokenText(id))).toEqual([
        "It",
        " ",
        "is",
        " ",
        "123",
        "+",
        "456",
        "7",
        ";",
        " ",
        "calculator",
        " ",
        "calc",
      ]);
      fc.assert(
        fc.property(
          fc.string({ unit: fc.constantFrom(...'0123456789 abcItscalculator+-*{}":,') }),
          (text) => {
            expect(pieced.decode(pieced.encode(text))).toBe(text);
            // Never longer than the character encoding, and identical without pieces in the text.
            expect(pieced.encode(text).length).toBeLessThanOrEqual(tok.encode(text).length);
          },
        ),
      );
    });
    it("keeps char ids stable, survives its config, and rejects bad pieces", () => {
      expect(pieced.encode("a")).toEqual(tok.encode("a"));
      expect(pieced.vocabSize).toBe(tok.vocabSize + 994);
      const again = Tokenizer.fromConfig(JSON.parse(JSON.stringify(pieced.toConfig())));
      expect(again.encode("It is 85.")).toEqual(pieced.encode("It is 85."));
      expect(tok.toConfig()).not.toHaveProperty("pieces");
      expect(() => new Tokenizer({ pieces: ["a"] })).toThrow(/at least 2/);
      expect(() => new Tokenizer({ pieces: ["ab", "ab"] })).toThrow(/repeat/);
      expect(() => new Tokenizer({ chars: "ab", pieces: ["ac"] })).toThrow(/"c"/);
    });
  });
});

describe("ChatTemplate", () => {
  it("tokenizes multi-turn chats incrementally: earlier turns' ids never change", () => {
    const turns: ChatMessage[] = [
      { role: "system", content: "You add numbers." },
      { role: "user", content: "What is 2+3?" },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "a", type: "function", function: { name: "calculator", arguments: '{"expression":"2+3"}' } },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "5" },
      { role: "assistant", content: "5" },
      { role: "user", content: "And 5*5?" },
    ];
    let previous: number[] = [];
    for (let k = 1; k <= turns.length; k++) {
      const withoutPrompt = template.encodeChat(turns.slice(0, k), tools, { addGenerationPrompt: false }).ids;
      expect(withoutPrompt.slice(0, previous.length)).toEqual(previous);
      // The generation prompt of turn k is a prefix of the chat once the assistant reply is appended.
      const prompt = template.encodeChat(turns.slice(0, k), tools).ids;
      const next = turns[k];
      if (next?.role === "assistant") {
        const extended = template.encodeChat(turns.slice(0, k + 1), tools, {
          addGenerationPrompt: false,
        }).ids;
        expect(extended.slice(0, prompt.length)).toEqual(prompt);
      }
      previous = withoutPrompt;
    }
  });

  it("holds for arbitrary appended user/assistant turns (property)", () => {
    const msg = fc.record({
      role: fc.constantFrom("user" as const, "assistant" as const, "tool" as const),
      content: fc.string({ maxLength: 20 }),
    });
    fc.assert(
      fc.property(fc.array(msg, { minLength: 1, maxLength: 6 }), msg, (history, extra) => {
        const a = template.encodeChat(history, tools, { addGenerationPrompt: false }).ids;
        const b = template.encodeChat([...history, extra], tools, { addGenerationPrompt: false }).ids;
        expect(b.slice(0, a.length)).toEqual(a);
      }),
      { numRuns: 100 },
    );
  });

  it("masks exactly the assistant's tokens and renders tools and tool calls", () => {
    const e = template.encodeChat(
      [
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: "ok",
          tool_calls: [
            {
              id: "x",
              type: "function",
              function: { name: "calculator", arguments: '{ "expression" : "1+1" }' },
            },
          ],
        },
      ],
      tools,
      { addGenerationPrompt: false },
    );
    expect(tok.decode(e.ids)).toBe(
      '<bos><|tools|>calculator(expression)<eos><|user|>hi<eos><|assistant|>ok<tool_call>{"name":"calculator","arguments":{"expression":"1+1"}}</tool_call><eos>',
    );
    const masked = e.ids.filter((_, i) => e.assistantMask[i] === 1);
    expect(tok.decode(masked)).toBe(
      'ok<tool_call>{"name":"calculator","arguments":{"expression":"1+1"}}</tool_call><eos>',
    );
    expect(e.messageOffsets).toHaveLength(2);
    const json = new ChatTemplate(tok, { toolStyle: "json" }).encodeChat(
      [{ role: "user", content: "x" }],
      tools,
    );
    expect(tok.decode(json.ids)).toContain('{"name":"calculator","description":"math"');
  });

  it("rejects malformed messages with an error naming the field", () => {
    expect(() => template.encodeChat([{ role: "wizard", content: "x" } as never])).toThrow(
      InvalidArgumentError,
    );
    try {
      template.encodeChat([{ role: "user", content: 5 } as never]);
    } catch (error) {
      expect(InvalidArgumentError.isInstance(error)).toBe(true);
      expect((error as InvalidArgumentError).field).toContain("messages");
    }
  });
});

describe("parseToolCalls", () => {
  it("parses canonical calls and re-renders them to the same text", () => {
    const body = renderToolCallBody("calculator", '{"expression":"2*(3+4)"}');
    const text = `Let me compute.<tool_call>${body}</tool_call>`;
    const parsed = parseToolCalls(text, () => "id1");
    expect(parsed.content).toBe("Let me compute.");
    expect(parsed.toolCalls).toEqual([
      {
        id: "id1",
        type: "function",
        function: { name: "calculator", arguments: '{"expression":"2*(3+4)"}' },
      },
    ]);
    expect(renderToolCallBody("calculator", parsed.toolCalls[0]!.function.arguments)).toBe(body);
    expect(
      parseToolCalls(`<tool_call>${body}</tool_call><tool_call>${body}</tool_call>`).toolCalls,
    ).toHaveLength(2);
    expect(parseToolCalls(`<tool_call>${body}</tool_call>`).content).toBeNull();
  });

  it("returns unparseable calls as plain content", () => {
    for (const bad of [
      "<tool_call>{nope</tool_call>",
      "<tool_call>{}</tool_call>",
      'x<tool_call>{"name":"a"}',
      '<tool_call>["a"]</tool_call>',
    ]) {
      expect(parseToolCalls(bad)).toEqual({ content: bad, toolCalls: [] });
    }
  });

  it("never throws on arbitrary text (property)", () => {
    const piece = fc.oneof(
      fc.string(),
      fc.constantFrom("<tool_call>", "</tool_call>", '{"name":"f","arguments":{}}', "{", "}"),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 8 }), (parts) => {
        const out = parseToolCalls(parts.join(""));
        expect(Array.isArray(out.toolCalls)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });
});
