/** Shared set-up of the APO tests: the mock world on loopback and an openai-SDK agent graded by exact match. */
import { formatPromptTemplate, instrumentOpenAI, type RolloutContext, rollout } from "@agl/core";
import { type MockReply, type MockRequestInfo, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { type ArithmeticTask, mockOptimizerResponder } from "./mock-optimizer/index.js";

export const SEED_TEMPLATE = "You are a helpful assistant.\nQuestion: {question}";

export const arithmeticAgent = rollout(
  async (task: ArithmeticTask, { llm, promptTemplate }: RolloutContext) => {
    if (!llm || !promptTemplate) throw new Error("the agent needs an LLM and a prompt template");
    const client = instrumentOpenAI(
      new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 0 }),
    );
    const reply = await client.chat.completions.create({
      model: llm.model,
      messages: [
        { role: "user", content: formatPromptTemplate(promptTemplate, { question: task.question }) },
      ],
    });
    return (reply.choices[0]?.message.content ?? "").trim() === task.answer ? 1 : 0;
  },
);

/** Which optimiser call this is, per role, counted from 1 (so a script can misbehave on chosen calls). */
export interface CallInfo {
  role: "gradient" | "edit";
  n: number;
  request: MockRequestInfo;
}

/**
 * The mock world (agent model, critic "mock-critic", editor "mock-editor") on one loopback server, with an
 * optional script that may replace any optimiser reply (return undefined to keep the scripted one).
 */
export async function startMockWorld(
  script?: (call: CallInfo) => MockReply | Promise<MockReply> | undefined,
) {
  const base = mockOptimizerResponder();
  const counts = { gradient: 0, edit: 0 };
  const server = await startMockLLMServer({
    respond: async (request) => {
      const model = request.body?.model;
      const role = model === "mock-critic" ? "gradient" : model === "mock-editor" ? "edit" : undefined;
      if (role) {
        const n = ++counts[role];
        const override = script ? await script({ role, n, request }) : undefined;
        if (override) return override;
      }
      return base(request);
    },
  });
  return { server, counts };
}
