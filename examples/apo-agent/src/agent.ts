/**
 * The agent: an ordinary `openai`-SDK program that answers an arithmetic question. Its system prompt is
 * the `prompt_template` resource APO optimises; the question is the user message. Reward 1 when the reply
 * is exactly the expected number, else 0. Nothing here knows about prompt optimisation.
 */
import { emitReward, formatPromptTemplate, instrumentOpenAI, type RolloutContext, rollout } from "@agl/core";
import OpenAI from "openai";

export interface ArithmeticTask {
  question: string;
  answer: string;
}

export const SEED_SYSTEM_PROMPT = "You are a friendly assistant who helps people with arithmetic.";

export const apoAgent = rollout(
  async (task: ArithmeticTask, { llm, promptTemplate, signal }: RolloutContext) => {
    if (!llm || !promptTemplate) throw new Error("apo-agent needs an LLM and a prompt_template resource");
    const client = instrumentOpenAI(
      new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 2 }),
    );
    const reply = await client.chat.completions.create(
      {
        model: llm.model,
        messages: [
          { role: "system", content: formatPromptTemplate(promptTemplate, {}) },
          { role: "user", content: task.question },
        ],
        ...llm.sampling_parameters,
      },
      { signal },
    );
    const text = (reply.choices[0]?.message.content ?? "").trim();
    emitReward(text === task.answer ? 1 : 0);
  },
);
