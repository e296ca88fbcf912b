import { generateText, type LanguageModel, stepCountIs, streamText, tool } from "ai";
import { z } from "zod";

const tools = {
  add: tool({
    description: "Add two numbers",
    inputSchema: z.object({ a: z.number(), b: z.number() }),
    execute: async ({ a, b }) => String(a + b),
  }),
};

/** The AI SDK agent, whatever the provider: a tool round trip, then a streamed turn continuing it. */
export async function runAiSdkAgent(model: LanguageModel): Promise<string[]> {
  const system = "Use the add tool for sums.";
  const first = await generateText({
    model,
    tools,
    stopWhen: stepCountIs(3),
    system,
    prompt: "What is 17 + 25?",
  });
  const streamed = streamText({
    model,
    tools,
    stopWhen: stepCountIs(3),
    system,
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
