import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const tools = {
  add: tool({
    description: "Add two numbers",
    inputSchema: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => String(a + b),
  }),
};

/** The AI SDK with `openai(model)`, which speaks the Responses API. The one change: `baseURL`. */
export async function runAiSdkResponses(baseURL: string, apiKey = "unused"): Promise<string[]> {
  const openai = createOpenAI({ baseURL, apiKey });
  const first = await generateText({
    model: openai("policy"),
    tools,
    stopWhen: stepCountIs(3),
    prompt: "What is 17 + 25?",
  });
  const streamed = streamText({
    model: openai("policy"),
    tools,
    stopWhen: stepCountIs(3),
    // the second turn continues the conversation, streamed
    messages: [
      { role: "user", content: "What is 17 + 25?" },
      ...first.response.messages,
      { role: "user", content: "And 100 + 23?" },
    ],
  });
  let text = "";
  for await (const delta of streamed.textStream) text += delta;
  return [first.text, text];
}
