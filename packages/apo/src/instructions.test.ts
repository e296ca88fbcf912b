import type { MessagesExample } from "@agl/adapter";
import { describe, expect, it } from "vitest";
import {
  DEFAULT_EDIT_INSTRUCTIONS,
  DEFAULT_GRADIENT_INSTRUCTIONS,
  type Experiment,
  renderConversation,
} from "./instructions.js";

const call = (...turns: Array<[string, string]>): MessagesExample => ({
  messages: turns.map(([role, content]) => ({ role, content })),
  tools: [],
});

describe("renderConversation", () => {
  it("shows a growing chat once, through its last call", () => {
    const first = call(["system", "S"], ["user", "Q"], ["assistant", "A1"]);
    const second = call(
      ["system", "S"],
      ["user", "Q"],
      ["assistant", "A1"],
      ["user", "more"],
      ["assistant", "A2"],
    );
    expect(renderConversation([first, second], 1000)).toBe(
      "[system] S\n[user] Q\n[assistant] A1\n[user] more\n[assistant] A2",
    );
  });

  it("shows independent calls one after the other, tool calls spelled out", () => {
    const planner: MessagesExample = {
      messages: [
        { role: "user", content: "plan" },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "calc", arguments: '{"x":1}' } }],
        },
      ],
      tools: [],
    };
    const text = renderConversation([planner, call(["user", "answer"], ["assistant", "42"])], 1000);
    expect(text).toBe(
      '--- LLM call 1 of 2\n[user] plan\n[assistant] \n  -> calc({"x":1})\n--- LLM call 2 of 2\n[user] answer\n[assistant] 42',
    );
    expect(renderConversation([], 100)).toBe("(no LLM call was recorded)");
  });

  it("cuts the middle of a long conversation and stays within the limit", () => {
    const long = call(["user", `BEGIN ${"x".repeat(5000)} END`]);
    const text = renderConversation([long], 300);
    expect(text.length).toBeLessThanOrEqual(300);
    expect(text.startsWith("[user] BEGIN")).toBe(true);
    expect(text.endsWith("END")).toBe(true);
    expect(text).toMatch(/\[\.\.\. \d+ characters cut \.\.\.\]/);
  });
});

describe("built-in instructions", () => {
  const experiments: Experiment[] = [
    { status: "succeeded", reward: 1, conversations: [call(["user", "good run"], ["assistant", "ok"])] },
    { status: "failed", reward: null, conversations: [] },
  ];

  it("every critique wording shows the template, each run's outcome and its conversation", () => {
    expect(new Set(DEFAULT_GRADIENT_INSTRUCTIONS.map((g) => g.name)).size).toBe(3);
    for (const g of DEFAULT_GRADIENT_INSTRUCTIONS) {
      const text = g
        .messages({ template: "TEMPLATE {q}", experiments, maxExperimentChars: 1000 })
        .map((m) => m.content)
        .join("\n");
      expect(text).toContain("<template>\nTEMPLATE {q}\n</template>");
      expect(text).toContain("status succeeded, reward 1");
      expect(text).toContain("status failed, reward none");
      expect(text).toContain("[user] good run");
    }
  });

  it("every edit wording carries the critique, names the placeholders and asks for <prompt> tags", () => {
    expect(new Set(DEFAULT_EDIT_INSTRUCTIONS.map((e) => e.name)).size).toBe(2);
    for (const e of DEFAULT_EDIT_INSTRUCTIONS) {
      const text = e
        .messages({ template: "T {q} {ctx}", critique: "CRITIQUE-TEXT", variables: ["q", "ctx"] })
        .map((m) => m.content)
        .join("\n");
      expect(text).toContain("CRITIQUE-TEXT");
      expect(text).toContain("({q}, {ctx})");
      expect(text).toContain("<prompt>");
    }
  });
});
