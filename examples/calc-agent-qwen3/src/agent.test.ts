import { llm } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { afterEach, describe, expect, it } from "vitest";
import { parseAnswer, solve } from "./agent.js";
import type { Problem } from "./dataset.js";

const problem: Problem = {
  id: "p",
  question: "Ann has 37 pens, gets 48 more, then gives 20 away. How many left?",
  answer: 65,
  steps: [
    { op: "+", a: 37, b: 48 },
    { op: "-", a: 85, b: 20 },
  ],
};

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function serve(
  replies: Array<{ content?: string | null; tool_calls?: Array<{ name: string; arguments: string }> }>,
) {
  let i = 0;
  const server = await startMockLLMServer({ respond: () => replies[Math.min(i++, replies.length - 1)]! });
  close = () => server.close();
  const resource = llm({ endpoint: server.baseURL, model: "mock", sampling_parameters: { temperature: 1 } });
  return { server, resource };
}

describe("calc-agent", () => {
  it("runs the calls the model chains and returns each result to it", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"37+48"}' }] },
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr": "85-20"}' }] },
      { content: "65" },
    ]);
    const result = await solve(problem, { llm: resource, rollout: { metadata: { seed: 7 } } });
    expect(result).toMatchObject({ correct: true, toolCalls: 2, answer: 65 });
    expect(result.messages.map((m) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
      "assistant",
    ]);
    expect(result.messages.at(-1)!.content).toBe("65");
    expect(server.requests).toHaveLength(3);
    const first = server.requests[0]!.body;
    expect(first.tools[0].function.name).toBe("calculator");
    expect(first.seed).toBe(7);
    expect(first.tool_choice).toBeUndefined();
    const last = server.requests[2]!.body.messages;
    expect(last.map((m: { role: string }) => m.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "tool",
    ]);
    expect(last[2].content).toBe("85");
    expect(last[4].content).toBe("65");
    expect(last[4].tool_call_id).toBe(last[3].tool_calls[0].id);
  });

  it("one call and a guess in the head is wrong; the forced-tool baseline asks for calls on the first turns only", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"37+48"}' }] },
      { content: "I think 85-20 = 63." },
    ]);
    const result = await solve(problem, { llm: resource }, { requireToolTurns: 2 });
    expect(result).toMatchObject({ correct: false, toolCalls: 1, answer: 63 });
    expect(server.requests.map((r) => r.body.tool_choice)).toEqual(["required", "required"]);
  });

  it("shows the model an error for two operations in one call", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"37+48-20"}' }] },
      { content: "65" },
    ]);
    const result = await solve(problem, { llm: resource });
    expect(result.correct).toBe(true);
    expect(server.requests[1]!.body.messages[2].content).toBe("error");
  });

  it("shows the model an error for a malformed call and scores a wrong final answer 0", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: "null" }] },
      { content: "64" },
    ]);
    const result = await solve(problem, { llm: resource });
    expect(result.correct).toBe(false);
    expect(server.requests[1]!.body.messages[2].content).toBe("error");
  });

  it("gives up after the turn limit", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"1+1"}' }] },
    ]);
    const result = await solve(problem, { llm: resource });
    expect(result).toMatchObject({ correct: false, toolCalls: 3, answer: null });
    expect(server.requests).toHaveLength(3);
  });

  it("parses the first integer of a reply", () => {
    expect(parseAnswer("85")).toBe(85);
    expect(parseAnswer("It is -3.")).toBe(-3);
    expect(parseAnswer("I think 85-20 = 66.")).toBe(66);
    expect(parseAnswer("none")).toBeNull();
    expect(parseAnswer(null)).toBeNull();
  });
});
