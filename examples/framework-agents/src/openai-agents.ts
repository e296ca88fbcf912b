import { Agent, OpenAIProvider, Runner, setTracingDisabled, tool } from "@openai/agents";
import { z } from "zod";

const add = tool({
  name: "add",
  description: "Add two numbers",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: async ({ a, b }) => String(a + b),
});

/**
 * An @openai/agents agent on its default Responses API. The one change for training: the provider's
 * `baseURL` points at the proxy (`OPENAI_BASE_URL` works too).
 */
export async function runOpenAIAgents(baseURL: string, apiKey = "unused"): Promise<string[]> {
  setTracingDisabled(true); // the SDK's own trace export goes to OpenAI's platform; the proxy records the calls
  const runner = new Runner({ modelProvider: new OpenAIProvider({ baseURL, apiKey }) });
  const agent = new Agent({
    name: "adder",
    instructions: "Use the add tool for sums.",
    model: "policy",
    tools: [add],
  });
  const first = await runner.run(agent, "What is 17 + 25?");
  // a streamed turn continuing the conversation
  const streamed = await runner.run(agent, [...first.history, { role: "user", content: "And 100 + 23?" }], {
    stream: true,
  });
  for await (const _ of streamed.toTextStream()) {
    // consumed as a UI would
  }
  await streamed.completed;
  return [String(first.finalOutput), String(streamed.finalOutput)];
}
