import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import {
  evaluateArithmetic,
  habitsFromPrompt,
  instructionFollowingAnswer,
  instructionFollowingResponder,
} from "./instruction-following.js";
import { startMockLLMServer } from "./server.js";

/** An independent reference: JavaScript's own evaluation of the same expression. */
const jsEval = (expression: string) => Function(`"use strict"; return (${expression});`)() as number;

describe("instruction-following mock model", () => {
  it("evaluates with precedence like JavaScript, and strictly left to right without", () => {
    for (const e of [
      "2 + 3 * 4",
      "10 - 2 * 3 + 7",
      "5 * 6 - 4 * 2",
      "-3 + 4 * 5",
      "7 - 10",
      "12 * 3 * 2 + 1",
    ]) {
      expect(evaluateArithmetic(e, true)).toBe(jsEval(e));
    }
    expect(evaluateArithmetic("2 + 3 * 4", false)).toBe(20);
    expect(evaluateArithmetic("10 - 2 * 3 + 7", false)).toBe(31);
  });

  it("keeps each habit until the prompt says otherwise", () => {
    expect(habitsFromPrompt("Answer: What is 1 + 1?")).toEqual({
      numberOnly: false,
      precedence: false,
      plainDigits: false,
    });
    expect(instructionFollowingAnswer("What is 1200 + 3 * 100?")).toBe(
      "Sure! Let me work that out. The answer is 120,300.",
    );
    expect(instructionFollowingAnswer("Reply with only the number. What is 1200 + 3 * 100?")).toBe("120,300");
    expect(
      instructionFollowingAnswer(
        "Reply with only the number, digits only. Follow the order of operations.\nWhat is 1200 + 3 * 100?",
      ),
    ).toBe("1500");
    expect(instructionFollowingAnswer("Solve the user's problem.")).toMatch(/not sure what you are asking/);
  });

  it("answers the last question of the prompt", () => {
    expect(instructionFollowingAnswer("Example: What is 1 + 1? is 2. Only the number. What is 2 * 4?")).toBe(
      "8",
    );
  });

  it("serves over HTTP through the openai SDK, system prompt included", async () => {
    const server = await startMockLLMServer({ respond: instructionFollowingResponder() });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: "x", maxRetries: 0 });
      const reply = await client.chat.completions.create({
        model: "mock-model",
        messages: [
          { role: "system", content: "Use operator precedence. Give just the number." },
          { role: "user", content: "What is 2 + 3 * 4?" },
        ],
      });
      expect(reply.choices[0]?.message.content).toBe("14");
    } finally {
      await server.close();
    }
  });
});

describe("mock error replies", () => {
  it("answers with the reply's HTTP error, headers included, and the SDK retries a 429", async () => {
    let calls = 0;
    const server = await startMockLLMServer({
      respond: () =>
        ++calls === 1
          ? { error: { status: 429, message: "slow down", headers: { "retry-after-ms": "5" } } }
          : { content: "ok" },
    });
    try {
      const raw = await fetch(`${server.baseURL}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
      expect(raw.status).toBe(429);
      expect(raw.headers.get("retry-after-ms")).toBe("5");
      expect(await raw.json()).toEqual({ error: { message: "slow down", type: "mock_error" } });
      calls = 0;
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: "x", maxRetries: 2 });
      const reply = await client.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(reply.choices[0]?.message.content).toBe("ok");
      expect(calls).toBe(2);
    } finally {
      await server.close();
    }
  });
});
