import { createAnthropic } from "@ai-sdk/anthropic";
import { generateText, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const tools = {
  add: tool({
    description: "Add two numbers",
    inputSchema: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => String(a + b),
  }),
};

/** The AI SDK's Anthropic provider (`/v1/messages`). The one change: `baseURL` (ending in `/v1`). */
export async function runAiSdkAnthropic(baseURL: string, apiKey = "unused"): Promise<string[]> {
  const anthropic = createAnthropic({ baseURL, apiKey });
  const first = await generateText({
    model: anthropic("policy"),
    tools,
    stopWhen: stepCountIs(3),
    system: "Use the add tool for sums.",
    prompt: "What is 17 + 25?",
  });
  const streamed = streamText({
    model: anthropic("policy"),
    tools,
    stopWhen: stepCountIs(3),
    system: "Use the add tool for sums.",
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
