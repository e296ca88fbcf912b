import { llm } from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { afterEach, describe, expect, it } from "vitest";
import { parseAnswer, solve } from "./agent.js";
import type { Problem } from "./dataset.js";

const problem: Problem = {
  id: "p",
  question: "Ann has 37 pens, gets 48 more. How many?",
  answer: 85,
  op: "+",
  a: 37,
  b: 48,
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
  it("runs the calculator the model asks for and returns the tool result to it", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"37+48"}' }] },
      { content: "85" },
    ]);
    const result = await solve(problem, { llm: resource, rollout: { metadata: { seed: 7 } } });
    expect(result).toEqual({ correct: true, toolCalls: 1, answer: 85 });
    expect(server.requests).toHaveLength(2);
    const first = server.requests[0]!.body;
    expect(first.tools[0].function.name).toBe("calculator");
    expect(first.seed).toBe(7);
    const second = server.requests[1]!.body.messages;
    expect(second.map((m: { role: string }) => m.role)).toEqual(["user", "assistant", "tool"]);
    expect(second[2].content).toBe("85");
    expect(second[2].tool_call_id).toBe(second[1].tool_calls[0].id);
  });

  it("shows the model an error for a malformed call and scores a wrong final answer 0", async () => {
    const { server, resource } = await serve([
      { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"37+"}' }] },
      { content: "84" },
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
    expect(result).toEqual({ correct: false, toolCalls: 3, answer: null });
    expect(server.requests).toHaveLength(3);
  });

  it("parses the first integer of a reply", () => {
    expect(parseAnswer("85")).toBe(85);
    expect(parseAnswer("It is -3.")).toBe(-3);
    expect(parseAnswer("I think 37+48 = 86.")).toBe(86);
    expect(parseAnswer("none")).toBeNull();
    expect(parseAnswer(null)).toBeNull();
  });
});
