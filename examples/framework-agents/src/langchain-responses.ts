import {
  type AIMessage,
  type AIMessageChunk,
  type BaseMessage,
  HumanMessage,
  ToolMessage,
} from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { ChatOpenAI } from "@langchain/openai";
import { z } from "zod";

const add = tool(async ({ a, b }: { a: number; b: number }) => String(a + b), {
  name: "add",
  description: "Add two numbers",
  schema: z.object({ a: z.number(), b: z.number() }),
});

/** Call the model, run the tools it asks for, repeat until it answers. */
async function loop(model: ReturnType<ChatOpenAI["bindTools"]>, messages: BaseMessage[], stream: boolean) {
  for (let step = 0; step < 4; step++) {
    let reply: AIMessage | AIMessageChunk;
    if (stream) {
      let acc: AIMessageChunk | null = null;
      for await (const chunk of await model.stream(messages)) acc = acc ? acc.concat(chunk) : chunk;
      if (!acc) throw new Error("empty stream");
      reply = acc;
    } else {
      reply = await model.invoke(messages);
    }
    messages.push(reply);
    if (!reply.tool_calls?.length) return reply.text;
    for (const call of reply.tool_calls) {
      const result = await add.invoke(call.args as { a: number; b: number });
      messages.push(new ToolMessage({ tool_call_id: call.id!, content: String(result) }));
    }
  }
  throw new Error("no answer after 4 steps");
}

/** LangChain.js `ChatOpenAI` on the Responses API. The one change: `configuration.baseURL`. */
export async function runLangChainResponses(baseURL: string, apiKey = "unused"): Promise<string[]> {
  const llm = new ChatOpenAI({ model: "policy", apiKey, useResponsesApi: true, configuration: { baseURL } });
  const model = llm.bindTools([add]);
  const first = await loop(model, [new HumanMessage("What is 17 + 25?")], false);
  const second = await loop(model, [new HumanMessage("What is 100 + 23?")], true);
  return [first, second];
}
