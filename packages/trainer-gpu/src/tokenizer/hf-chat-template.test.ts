import { execFileSync } from "node:child_process";
import { readFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InvalidArgumentError } from "@agl/core";
import { AutoTokenizer, env } from "@huggingface/transformers";
import { beforeAll, describe, expect, it } from "vitest";
import { qwen3TokenizerDir } from "../test-support/hf-tokenizer-files.js";
import { HfChatTemplate, templateMessages } from "./hf-chat-template.js";
import { HfTokenizer } from "./hf-tokenizer.js";
import type { ChatMessage, ToolDefinition } from "./messages.js";

const WEATHER: ToolDefinition = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather for a city — in °C",
    parameters: {
      type: "object",
      properties: { city: { type: "string", description: "e.g. «München»" }, days: { type: "integer" } },
      required: ["city"],
    },
  },
};
const CALC: ToolDefinition = {
  type: "function",
  function: { name: "calc", parameters: { type: "object", properties: { expr: { type: "string" } } } },
};

const call = (id: string, name: string, args: unknown) => ({
  id,
  type: "function" as const,
  function: { name, arguments: JSON.stringify(args) },
});

interface Case {
  name: string;
  messages: ChatMessage[];
  tools?: ToolDefinition[];
  addGenerationPrompt: boolean;
  extra?: Record<string, unknown>;
}

const CASES: Case[] = [
  { name: "one user turn", messages: [{ role: "user", content: "Hi there" }], addGenerationPrompt: true },
  {
    name: "system and multi-turn, no generation prompt",
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "4" },
      { role: "user", content: "And   3+3?\n\n  " },
      { role: "assistant", content: "6" },
    ],
    addGenerationPrompt: false,
  },
  {
    name: "tools with a system message",
    messages: [
      { role: "system", content: "Use tools." },
      { role: "user", content: "Weather in München?" },
    ],
    tools: [WEATHER, CALC],
    addGenerationPrompt: true,
  },
  {
    name: "tool call, tool result, final answer",
    messages: [
      { role: "user", content: "What is 12*7?" },
      { role: "assistant", content: null, tool_calls: [call("c1", "calc", { expr: "12*7" })] },
      { role: "tool", tool_call_id: "c1", content: "84" },
      { role: "assistant", content: "It is 84." },
    ],
    tools: [CALC],
    addGenerationPrompt: false,
  },
  {
    name: "parallel tool calls with content and consecutive tool results",
    messages: [
      { role: "user", content: "Weather in Paris and 東京 for 3 days?" },
      {
        role: "assistant",
        content: "Checking both.",
        tool_calls: [
          call("a", "get_weather", { city: "Paris", days: 3 }),
          call("b", "get_weather", { city: "東京", days: 3, note: 'say "hi"\n' }),
        ],
      },
      { role: "tool", tool_call_id: "a", content: '{"temp": 12.5}' },
      { role: "tool", tool_call_id: "b", content: '{"temp": 20}' },
    ],
    tools: [WEATHER],
    addGenerationPrompt: true,
  },
  {
    name: "reasoning content and content parts",
    messages: [
      {
        role: "user",
        content: [
          { type: "text", text: "part one" },
          { type: "text", text: "part two" },
        ],
      },
      { role: "assistant", content: "<think>\nLet me think.\n</think>\n\nDone." },
    ],
    addGenerationPrompt: false,
  },
  {
    name: "thinking disabled by an extra template variable",
    messages: [{ role: "user", content: "Quick answer please" }],
    addGenerationPrompt: true,
    extra: { enable_thinking: false },
  },
];

describe("HfChatTemplate on the real Qwen3 tokenizer_config.json", () => {
  let tok: HfTokenizer;
  let ref: Awaited<ReturnType<typeof AutoTokenizer.from_pretrained>>;
  let templateText: string;

  beforeAll(async () => {
    const dir = qwen3TokenizerDir();
    tok = await HfTokenizer.fromDir(dir);
    env.allowRemoteModels = false;
    env.localModelPath = `${dirname(dir)}/`;
    ref = await AutoTokenizer.from_pretrained(basename(dir));
    templateText = JSON.parse(await readFile(join(dir, "tokenizer_config.json"), "utf8")).chat_template;
  });

  const templateFor = (c: Case) => new HfChatTemplate(tok, { extraContext: c.extra });

  it("renders and tokenizes byte-identically to transformers.js apply_chat_template", () => {
    for (const c of CASES) {
      const t = templateFor(c);
      const opts = { add_generation_prompt: c.addGenerationPrompt, tools: c.tools ?? null, ...c.extra };
      const msgs = templateMessages(c.messages);
      const text = t.render(c.messages, c.tools, { addGenerationPrompt: c.addGenerationPrompt });
      expect(text, c.name).toBe(ref.apply_chat_template(msgs as never, { ...opts, tokenize: false }));
      const refIds = ref.apply_chat_template(msgs as never, {
        ...opts,
        return_tensor: false,
        return_dict: false,
      });
      expect(
        t.encodeChat(c.messages, c.tools, { addGenerationPrompt: c.addGenerationPrompt }).ids,
        c.name,
      ).toEqual(refIds);
    }
  });

  it("renders byte-identically to Python Jinja2 set up as transformers sets it up", () => {
    const script = join(dirname(fileURLToPath(import.meta.url)), "../test-support/render_chat_template.py");
    const contexts = CASES.map((c) => ({
      ...tok.specialTokens,
      additional_special_tokens: tok.additionalSpecialTokens,
      ...c.extra,
      messages: templateMessages(c.messages),
      tools: c.tools ?? null,
      documents: null,
      add_generation_prompt: c.addGenerationPrompt,
    }));
    const out = execFileSync("python3", [script], {
      input: JSON.stringify({ template: templateText, contexts }),
    });
    const expected = JSON.parse(out.toString("utf8")) as string[];
    CASES.forEach((c, i) => {
      expect(
        templateFor(c).render(c.messages, c.tools, { addGenerationPrompt: c.addGenerationPrompt }),
        c.name,
      ).toBe(expected[i]);
    });
  });

  it("accepts every message form apply_chat_template accepts, rendering as Python Jinja2 renders them as given", () => {
    // Raw transformers-style messages: arguments as objects, calls without id/type, the flat {name,
    // arguments} form, extra keys (Qwen3's reasoning_content), a named tool message.
    const raw: Array<{ name: string; messages: unknown[] }> = [
      {
        name: "object arguments, no id, no type",
        messages: [
          { role: "user", content: "What is 12*7?" },
          {
            role: "assistant",
            content: "",
            tool_calls: [{ function: { name: "calc", arguments: { expr: "12*7" } } }],
          },
          { role: "tool", content: "84" },
        ],
      },
      {
        name: "flat {name, arguments} calls, nested argument values",
        messages: [
          { role: "user", content: "Weather?" },
          {
            role: "assistant",
            content: "Checking.",
            tool_calls: [
              {
                name: "get_weather",
                arguments: { city: "東京", days: 3, opts: { unit: "C", tags: ["a", 1.5] } },
              },
            ],
          },
          { role: "tool", name: "get_weather", content: '{"temp": 20}' },
          { role: "assistant", content: "20 degrees." },
        ],
      },
      {
        name: "reasoning_content on an assistant turn",
        messages: [
          { role: "user", content: "2+2?" },
          { role: "assistant", content: "4", reasoning_content: "Two and two." },
        ],
      },
    ];
    const script = join(dirname(fileURLToPath(import.meta.url)), "../test-support/render_chat_template.py");
    const contexts = raw.map((c) => ({
      ...tok.specialTokens,
      additional_special_tokens: tok.additionalSpecialTokens,
      messages: c.messages,
      tools: [WEATHER, CALC],
      documents: null,
      add_generation_prompt: false,
    }));
    const out = execFileSync("python3", [script], {
      input: JSON.stringify({ template: templateText, contexts }),
    });
    const expected = JSON.parse(out.toString("utf8")) as string[];
    const t = new HfChatTemplate(tok);
    raw.forEach((c, i) => {
      const messages = c.messages as ChatMessage[];
      expect(t.render(messages, [WEATHER, CALC], { addGenerationPrompt: false }), c.name).toBe(expected[i]);
      expect(t.encodeChat(messages, [WEATHER, CALC], { addGenerationPrompt: false }).ids, c.name).toEqual(
        tok.encode(expected[i] as string, { addSpecialTokens: false }),
      );
    });
    expect(expected[2]).toContain("Two and two.");
    // A JSON-string argument (the OpenAI form) renders as the object would (vLLM parses it for templates).
    const asString = [
      { role: "user" as const, content: "What is 12*7?" },
      {
        role: "assistant" as const,
        content: "",
        tool_calls: [
          { id: "c1", type: "function" as const, function: { name: "calc", arguments: '{"expr":"12*7"}' } },
        ],
      },
    ];
    expect(t.render(asString, [CALC], { addGenerationPrompt: false })).toBe(
      t.render(
        [
          asString[0],
          {
            role: "assistant",
            content: "",
            tool_calls: [{ function: { name: "calc", arguments: { expr: "12*7" } } }],
          },
        ] as ChatMessage[],
        [CALC],
        { addGenerationPrompt: false },
      ),
    );
    // Malformed calls still name the field.
    expect(() =>
      t.render([{ role: "assistant", content: "", tool_calls: [{ function: { arguments: {} } }] }] as never),
    ).toThrow(/messages\[0\]\.tool_calls\[0\]/);
  });

  it("masks exactly the assistant's own tokens, through its <|im_end|>", () => {
    const c = CASES[4 - 1] as Case;
    const t = templateFor(c);
    const e = t.encodeChat(c.messages, c.tools, { addGenerationPrompt: false });
    expect(e.assistantMask).toHaveLength(e.ids.length);
    const spans: string[] = [];
    let cur: number[] = [];
    e.ids.forEach((id, i) => {
      if (e.assistantMask[i]) cur.push(id);
      else if (cur.length > 0) {
        spans.push(tok.decode(cur));
        cur = [];
      }
    });
    if (cur.length > 0) spans.push(tok.decode(cur));
    expect(spans).toEqual([
      '<tool_call>\n{"name": "calc", "arguments": {"expr": "12*7"}}\n</tool_call><|im_end|>',
      "<think>\n\n</think>\n\nIt is 84.<|im_end|>",
    ]);
    // A message starts where the chat rendered up to it ends; Qwen3 renders a chat that ENDS with an
    // assistant turn differently (empty think block), so the offset after that turn is undefined (-1).
    expect(e.messageOffsets).toHaveLength(4);
    expect(e.messageOffsets[2]).toBe(-1);
    expect(tok.decode(e.ids.slice(e.messageOffsets[1] as number, e.messageOffsets[3] as number))).toBe(
      '<|im_start|>assistant\n<tool_call>\n{"name": "calc", "arguments": {"expr": "12*7"}}\n</tool_call><|im_end|>\n' +
        "<|im_start|>user\n<tool_response>\n84\n</tool_response><|im_end|>\n",
    );
  });

  it("rejects bad messages, tools and template failures with InvalidArgumentError naming the field", () => {
    const t = new HfChatTemplate(tok);
    const bad = [{ role: "wizard", content: "x" }] as unknown as ChatMessage[];
    expect(() => t.encodeChat(bad)).toThrow(InvalidArgumentError);
    expect(() => t.encodeChat([{ role: "user", content: "x" }], [{ function: {} }] as never)).toThrow(
      /tools/,
    );
    const strict = new HfChatTemplate(tok, {
      template: "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}x",
    });
    expect(() => strict.encodeChat([{ role: "assistant", content: "x" }])).toThrow(/first must be user/);
  });
});
