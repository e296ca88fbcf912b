import { TraceToMessages } from "@agl/adapter";
import type { Attributes, Span } from "@agl/core";
import { describe, expect, it } from "vitest";
import { CALC_TOOL, tinySetup } from "../test-support/tiny.js";
import { prepareExample } from "./examples.js";
import { sft } from "./sft.js";

/** A span as the store holds it; only name and attributes matter to `TraceToMessages`. */
function span(id: string, attributes: Attributes): Span {
  return {
    rollout_id: "ro-1",
    attempt_id: "at-1",
    sequence_id: 0,
    trace_id: "t".repeat(32),
    span_id: id,
    parent_id: null,
    name: "chat tiny",
    status: { status_code: "OK", description: null },
    attributes: { "gen_ai.operation.name": "chat", ...attributes },
    events: [],
    links: [],
    start_time: 0,
    end_time: 1,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

const semconv = (input: unknown[], output: unknown[], extra: Attributes = {}): Attributes => ({
  "gen_ai.input.messages": JSON.stringify(input),
  "gen_ai.output.messages": JSON.stringify(output),
  ...extra,
});

/**
 * Spans in the OTel GenAI (>= 1.37) and older `gen_ai.prompt.N` conventions, covering what the adapter
 * emits for real traces: tool calls without ids, null content, mixed text/image parts, odd roles.
 */
function traceSpans(): Span[] {
  return [
    // 0: text + image user message, a tool call without an id and no text (content null), tools defined.
    span(
      "s0",
      semconv(
        [
          {
            role: "user",
            parts: [
              { type: "text", content: "2+3" },
              { type: "uri", uri: "https://x/img.png" },
              { type: "text", content: "?" },
            ],
          },
        ],
        [{ role: "assistant", parts: [{ type: "tool_call", name: "calc", arguments: { expr: "2+3" } }] }],
        { "gen_ai.tool.definitions": JSON.stringify([CALC_TOOL]) },
      ),
    ),
    // 1: plain old-style call.
    span("s1", {
      "gen_ai.prompt.0.role": "user",
      "gen_ai.prompt.0.content": "hi",
      "gen_ai.completion.0.role": "assistant",
      "gen_ai.completion.0.content": "ih.",
    }),
    // 2: only an image: nothing a text policy could condition on.
    span(
      "s2",
      semconv(
        [{ role: "user", parts: [{ type: "uri", uri: "https://x/a.png" }] }],
        [{ role: "assistant", parts: [{ type: "text", content: "a cat" }] }],
      ),
    ),
    // 3: prompt only (no completion recorded).
    span("s3", { "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "lost" }),
    // 4: a role the template has no token for.
    span("s4", {
      "gen_ai.prompt.0.role": "critic",
      "gen_ai.prompt.0.content": "meh",
      "gen_ai.completion.0.role": "assistant",
      "gen_ai.completion.0.content": "ok",
    }),
  ];
}

describe("sft on TraceToMessages output", () => {
  it("converts what it can, skips the rest with counted, logged reasons, and trains", async () => {
    const examples = new TraceToMessages().adapt(traceSpans());
    expect(examples).toHaveLength(5);
    // The shapes the strict chat schema rejects really are in the adapter's output.
    const reply = examples[0]!.messages[1]!;
    expect(reply.content).toBeNull();
    expect(reply.tool_calls?.[0]?.id).toBeNull();
    expect(Array.isArray(examples[0]!.messages[0]!.content)).toBe(true);

    const { model, template } = await tinySetup(21, 96);
    expect(() => template.encodeChat(examples[0]!.messages as never, examples[0]!.tools as never)).toThrow();
    const lines: string[] = [];
    const result = await sft(model, examples, {
      template,
      steps: 4,
      batchSize: 2,
      learningRate: 1e-2,
      progress: false,
      log: (l) => lines.push(l),
    });
    expect(result.skipped).toBe(3);
    expect(result.skippedExamples).toEqual([
      { index: 2, reason: "messages[0] has only non-text content (image_url)" },
      { index: 3, reason: "no assistant message" },
      { index: 4, reason: 'messages[0] has unsupported role "critic"' },
    ]);
    expect(lines).toEqual([
      '[agl] sft: skipped 3 of 5 examples (1 x messages[0] has only non-text content (image_url); 1 x no assistant message; 1 x messages[0] has unsupported role "critic")',
    ]);
    expect(result.losses).toHaveLength(4);
    for (const l of result.losses) expect(Number.isFinite(l)).toBe(true);
    // Every step (batch 2 of the 2 usable transcripts) trains on both replies, one token per character:
    // <tool_call> body </tool_call> <eos>, and "ih." <eos>.
    const body = JSON.stringify({ name: "calc", arguments: { expr: "2+3" } });
    expect(result.trainedTokens).toBe(4 * (1 + body.length + 1 + 1 + "ih.".length + 1));
    model.dispose();
  });

  it("fails with every reason when nothing is usable", async () => {
    const { model, template } = await tinySetup(22, 96);
    const bad = new TraceToMessages().adapt(traceSpans()).slice(2);
    await expect(sft(model, bad, { template, steps: 1, progress: false, log: () => {} })).rejects.toThrow(
      "sft: none of the 3 examples is usable: 1 x messages[0] has only non-text content (image_url); 1 x no assistant message",
    );
    model.dispose();
  });
});

describe("prepareExample", () => {
  it("fills null ids with unique ids, null content with '', joins text parts and stringifies arguments", () => {
    const r = prepareExample(
      {
        messages: [
          {
            role: "User",
            content: [
              { type: "text", text: "a" },
              { type: "input_text", text: "b" },
            ],
          },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              { id: null, type: "function", function: { name: "f", arguments: { x: 1 } } },
              { id: null, type: "function", function: { name: "g", arguments: "{}" } },
            ],
          },
          { role: "tool", content: null, tool_call_id: null },
          { role: "developer", content: "be brief" },
        ],
        tools: [{ type: "function", function: { name: "f", parameters: '{"type":"object"}' } }],
      },
      7,
    );
    expect(r).toEqual({
      ok: true,
      messages: [
        { role: "user", content: "ab" },
        {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "call_7_0", type: "function", function: { name: "f", arguments: '{"x":1}' } },
            { id: "call_7_1", type: "function", function: { name: "g", arguments: "{}" } },
          ],
        },
        { role: "tool", content: "" },
        { role: "system", content: "be brief" },
      ],
      tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    });
  });

  it("names what makes an example unusable", () => {
    const reason = (raw: unknown) => {
      const r = prepareExample(raw, 0);
      return r.ok ? "ok" : r.reason;
    };
    expect(reason({ messages: [{ role: "assistant", tool_calls: [{ id: "1", function: {} }] }] })).toBe(
      "messages[0].tool_calls[0] has no function name",
    );
    expect(reason({ messages: [{ role: "assistant", content: 5 }] })).toBe(
      "messages[0].content is neither text nor parts",
    );
    expect(
      reason({
        messages: [{ role: "assistant", content: "x" }],
        tools: [{ function: { name: "f", parameters: "{" } }],
      }),
    ).toBe("tools[0].parameters is not JSON");
    expect(reason("nope")).toBe("not an object with a messages list");
  });
});
