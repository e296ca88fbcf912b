import { describe, expect, it } from "vitest";
import { mkSpan } from "./test-helpers.js";
import { TraceToMessages } from "./trace-to-messages.js";

describe("TraceToMessages", () => {
  it("builds {messages, tools} with tool calls from the completion and tools from gen_ai.request.functions", () => {
    const span = mkSpan({
      id: "c1",
      name: "openai.chat.completion",
      attributes: {
        "gen_ai.response.id": "r1",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "be brief",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "weather in Paris?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
        "gen_ai.completion.0.tool_calls.0.id": "call_1",
        "gen_ai.completion.0.tool_calls.0.name": "get_weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '{ "city": "Paris" }',
        "gen_ai.request.functions.0.name": "get_weather",
        "gen_ai.request.functions.0.description": "Weather by city",
        "gen_ai.request.functions.0.parameters": '{"type":"object","properties":{"city":{"type":"string"}}}',
      },
    });
    expect(new TraceToMessages().adapt([span])).toEqual([
      {
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "weather in Paris?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [
              {
                id: "call_1",
                type: "function",
                function: { name: "get_weather", arguments: '{"city":"Paris"}' },
              },
            ],
          },
        ],
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "Weather by city",
              parameters: { type: "object", properties: { city: { type: "string" } } },
            },
          },
        ],
      },
    ]);
  });

  it("takes tool calls from direct child tool spans when the completion has none, and de-duplicates", () => {
    const llm = mkSpan({
      id: "c1",
      name: "openai.chat.completion",
      attributes: {
        "gen_ai.response.id": "r1",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "add 2 and 3",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "",
      },
    });
    const tool = mkSpan({
      id: "t1",
      parent: "c1",
      name: "tool",
      attributes: {
        "tool.name": "add",
        "tool.parameters": '{"a":2,"b":3}',
        "tool.call.id": "call_9",
        "tool.call.type": "function",
      },
    });
    const grandchild = mkSpan({
      id: "t2",
      parent: "t1",
      name: "tool",
      attributes: { "tool.name": "nested" },
    });
    const duplicate = { ...llm, span_id: "c1-copy" };
    const [example, ...rest] = new TraceToMessages().adapt([llm, tool, grandchild, duplicate]);
    expect(rest).toEqual([]);
    expect(example!.messages.at(-1)).toEqual({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_9", type: "function", function: { name: "add", arguments: '{"a":2,"b":3}' } }],
    });
  });

  it("reports LLM spans it cannot read", () => {
    const { output, diagnostics } = new TraceToMessages().adaptWithDiagnostics([
      mkSpan({ id: "x", name: "openai.chat.completion", attributes: { "gen_ai.request.model": "m" } }),
    ]);
    expect(output).toEqual([]);
    expect(diagnostics.diagnostics[0]).toMatchObject({ code: "message_conversion", spanId: "x" });
  });
});
