import { mockDecode, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { expect, it } from "vitest";

it("mock works", async () => {
  const s = await startMockLLMServer({
    respond: (_r, i) =>
      i === 0 ? { content: "hello world" } : { tool_calls: [{ name: "calc", arguments: '{"x":1}' }] },
  });
  const c = new OpenAI({ baseURL: s.baseURL, apiKey: "x" });
  const r: any = await c.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    n: 2,
    logprobs: true,
    return_token_ids: true,
  } as any);
  expect(mockDecode(r.choices[0].token_ids)).toBe("hello world");
  expect(r.choices[1].message.tool_calls[0].function.name).toBe("calc");
  const st: any = await c.chat.completions.create({
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    stream: true,
    return_token_ids: true,
    logprobs: true,
  } as any);
  let text = "";
  const ids: number[] = [];
  for await (const ch of st) {
    text += ch.choices[0]?.delta?.content ?? "";
    ids.push(...(ch.choices[0]?.token_ids ?? []));
  }
  expect(text).toBe("hello world");
  expect(mockDecode(ids)).toBe("hello world");
  await s.close();
});
