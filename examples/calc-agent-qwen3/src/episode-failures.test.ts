import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { describe, expect, it } from "vitest";
import type { Attempt } from "./agent.js";
import type { Problem } from "./dataset.js";
import { classifyEpisode, tallyEpisodes } from "./episode-failures.js";

// "Ann buys 7 boxes of 42 books, then gets 120 more. How many?" 7*42 = 294, 294+120 = 414.
const problem: Problem = {
  id: "val-0",
  question: "Ann buys 7 boxes of 42 books, then gets 120 more. How many?",
  answer: 414,
  steps: [
    { op: "*", a: 7, b: 42 },
    { op: "+", a: 294, b: 120 },
  ],
};
const call = (id: string, expr: string, result: string): ChatCompletionMessageParam[] => [
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id, type: "function", function: { name: "calculator", arguments: JSON.stringify({ expr }) } },
    ],
  },
  { role: "tool", tool_call_id: id, content: result },
];
const attempt = (calls: ChatCompletionMessageParam[], answer: number | null): Attempt => ({
  correct: answer === problem.answer,
  toolCalls: calls.filter((m) => m.role === "tool").length,
  answer,
  messages: [
    { role: "user", content: problem.question },
    ...calls,
    ...(answer === null ? [] : [{ role: "assistant" as const, content: `It is ${answer}.` }]),
  ],
});

describe("classifyEpisode", () => {
  it("scores a right two-call episode at every stage", () => {
    const r = classifyEpisode(
      problem,
      attempt([...call("a", "7*42", "294"), ...call("b", "294+120", "414")], 414),
    );
    expect(r).toEqual({
      calls: 2,
      firstCall: "right",
      carried: "right",
      operator: "right",
      secondOperand: "right",
      inHead: "none",
      correct: true,
    });
  });

  it("names a second operand copied from the first call, and a wrong carried result", () => {
    const r = classifyEpisode(
      problem,
      attempt([...call("a", "7*42", "294"), ...call("b", "249+42", "291")], 291),
    );
    expect(r).toMatchObject({
      carried: "wrong",
      operator: "right",
      secondOperand: "first call's b",
      correct: false,
    });
    const s = classifyEpisode(
      problem,
      attempt([...call("a", "7*42", "294"), ...call("b", "294 - 7", "287")], 287),
    );
    expect(s).toMatchObject({ carried: "right", operator: "wrong", secondOperand: "first call's a" });
  });

  it("separates answers in the head, no calls and malformed calls", () => {
    expect(classifyEpisode(problem, attempt(call("a", "7*42", "294"), 414))).toMatchObject({
      calls: 1,
      firstCall: "right",
      inHead: "right",
      correct: true,
    });
    expect(classifyEpisode(problem, attempt(call("a", "7*24", "168"), 288))).toMatchObject({
      firstCall: "wrong",
      inHead: "wrong",
    });
    expect(classifyEpisode(problem, attempt([], 414))).toMatchObject({
      calls: 0,
      firstCall: "none",
      inHead: "none",
    });
    const bad: ChatCompletionMessageParam[] = [
      ...call("a", "7*42", "294"),
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "b", type: "function", function: { name: "calculator", arguments: "{not json" } }],
      },
      { role: "tool", tool_call_id: "b", content: "error" },
    ];
    expect(classifyEpisode(problem, attempt(bad, null))).toMatchObject({
      calls: 2,
      carried: "wrong",
      operator: "wrong",
      secondOperand: "other",
    });
  });

  it("tallies every field but the absent ones", () => {
    const reports = [
      classifyEpisode(problem, attempt([...call("a", "7*42", "294"), ...call("b", "294+120", "414")], 414)),
      classifyEpisode(problem, attempt(call("a", "7*24", "168"), 288)),
    ];
    const t = tallyEpisodes(reports);
    expect(t).toMatchObject({ "calls=2": 1, "calls=1": 1, "firstCall=right": 1, "firstCall=wrong": 1 });
    expect(t["secondOperand=right"]).toBe(1);
    expect(t["inHead=wrong"]).toBe(1);
    expect(Object.keys(t).some((k) => k.endsWith("=none"))).toBe(false);
  });
});
