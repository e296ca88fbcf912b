import { type RolloutContext, rollout } from "@agl/core";
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { CalculatorError, calculate } from "./calculator.js";
import { CALCULATOR_TOOL, type Problem } from "./dataset.js";

/**
 * The agent: ordinary `openai` SDK code. It asks the model, runs any `calculator` calls itself and sends
 * the results back, until the model answers in plain text (at most `MAX_TURNS` model calls: two calls
 * and the answer). Reward 1 when the answer is the right number. Nothing here knows about training: the
 * LLM endpoint it gets is the trainer's proxy, which records the token ids.
 */

export const MAX_TURNS = 3;
/** A call is ~25 tokens, the answer ~8 (after Qwen3's empty think block). */
export const MAX_REPLY_TOKENS = 40;

export interface SolveOptions {
  /**
   * Send `tool_choice: "required"` on this many first turns (the server must then answer with a tool
   * call), `"auto"` after: the forced-tool baseline. 0 (default) leaves the choice to the model.
   */
  requireToolTurns?: number;
}

/** The last integer in the reply, if any: the result comes last ("37+48 = 85", "It is 85."). */
export function parseAnswer(text: string | null | undefined): number | null {
  const all = (text ?? "").match(/-?\d+/g);
  return all ? Number(all.at(-1)) : null;
}

export interface Attempt {
  correct: boolean;
  /** Calculator calls made. */
  toolCalls: number;
  answer: number | null;
  /** The conversation, the model's final reply included (what rejection-sampling fine-tuning trains on). */
  messages: ChatCompletionMessageParam[];
}

export async function solve(
  problem: Problem,
  { llm, rollout: r }: { llm: RolloutContext["llm"]; rollout?: Pick<RolloutContext["rollout"], "metadata"> },
  options: SolveOptions = {},
): Promise<Attempt> {
  if (!llm) throw new Error("calc-agent needs an LLM resource");
  const client = new OpenAI({ baseURL: llm.endpoint, apiKey: llm.api_key ?? "none", maxRetries: 6 });
  const sampling = llm.sampling_parameters as { temperature?: number; top_p?: number; max_tokens?: number };
  const seed = (r?.metadata as { seed?: number } | null | undefined)?.seed;
  let toolCalls = 0;
  const messages: ChatCompletionMessageParam[] = [{ role: "user", content: problem.question }];
  for (let turn = 0; turn < MAX_TURNS; turn++) {
    const res = await client.chat.completions.create({
      model: llm.model,
      messages,
      tools: [CALCULATOR_TOOL],
      ...(turn < (options.requireToolTurns ?? 0) ? { tool_choice: "required" as const } : {}),
      temperature: sampling.temperature ?? 1,
      top_p: sampling.top_p ?? 1,
      max_tokens: Math.min(sampling.max_tokens ?? MAX_REPLY_TOKENS, MAX_REPLY_TOKENS),
      ...(seed !== undefined ? { seed: seed + turn } : {}),
    });
    const message = res.choices[0]!.message;
    const calls = message.tool_calls ?? [];
    if (calls.length === 0) {
      const answer = parseAnswer(message.content);
      messages.push({ role: "assistant", content: message.content });
      return { correct: answer === problem.answer, toolCalls, answer, messages };
    }
    messages.push({ role: "assistant", content: message.content, tool_calls: calls });
    for (const call of calls) {
      toolCalls += 1;
      let result: string;
      try {
        if (call.type !== "function" || call.function.name !== "calculator")
          throw new CalculatorError("unknown tool");
        const args: unknown = JSON.parse(call.function.arguments);
        const expr =
          typeof args === "object" && args !== null ? (args as { expr?: unknown }).expr : undefined;
        result = String(calculate(String(expr ?? "")));
      } catch (error) {
        // Malformed calls are the model's mistake: show it an error, as a real tool runtime would.
        if (!(error instanceof CalculatorError || error instanceof SyntaxError)) throw error;
        result = "error";
      }
      messages.push({ role: "tool", tool_call_id: call.id, content: result });
    }
  }
  return { correct: false, toolCalls, answer: null, messages };
}

export const calcAgent = rollout<Problem>(
  async (task, context) => ((await solve(task, context)).correct ? 1 : 0),
  {
    name: "calc-agent",
  },
);
