import type { GeneratedToken, GenerateResult } from "../generate/request.js";
import type { ToolCall } from "../tokenizer/messages.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { newCallId } from "../tokenizer/tool-calls.js";
import { type ForcedToolCall, forcedFallbackCall } from "./tool-choice.js";

/**
 * Response pieces in OpenAI / vLLM shapes. Logprob fields: `logprob` is the RAW log-probability
 * (temperature 1, before top-k/top-p: vLLM's default `raw_logprobs` mode, and what a training forward
 * pass computes); `sampling_logprob` (an AGL extension) is the log-probability under the distribution the
 * token was actually drawn from (temperature-scaled, top-k/top-p renormalised, restricted to the ids a
 * forced `tool_choice` allowed): 0 for a token `tool_choice` forced, which also carries `forced: true`.
 */

export interface ChatLogprobEntry {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ token: string; logprob: number; bytes: number[] }>;
  sampling_logprob: number;
  /** Present (true) when `tool_choice` forced this token: the model did not choose it. */
  forced?: true;
}

const bytesOf = (s: string) => [...Buffer.from(s, "utf8")];

export function chatLogprobs(tok: TextTokenizer, tokens: readonly GeneratedToken[]): ChatLogprobEntry[] {
  return tokens.map((t) => {
    const text = tok.tokenText(t.id);
    return {
      token: text,
      logprob: t.logprob,
      bytes: bytesOf(text),
      top_logprobs: (t.topLogprobs ?? []).map((a) => {
        const alt = tok.tokenText(a.id);
        return { token: alt, logprob: a.logprob, bytes: bytesOf(alt) };
      }),
      sampling_logprob: t.samplingLogprob,
      ...(t.forced ? { forced: true as const } : {}),
    };
  });
}

export interface CompletionLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Array<Record<string, number>> | null;
  text_offset: number[];
  sampling_logprobs: number[];
}

export function completionLogprobs(
  tok: TextTokenizer,
  tokens: readonly GeneratedToken[],
  startOffset = 0,
): CompletionLogprobs {
  let offset = startOffset;
  const text_offset: number[] = [];
  for (const t of tokens) {
    text_offset.push(offset);
    offset += tok.decode([t.id], { skipSpecialTokens: true }).length;
  }
  const withTop = tokens.some((t) => t.topLogprobs);
  return {
    tokens: tokens.map((t) => tok.tokenText(t.id)),
    token_logprobs: tokens.map((t) => t.logprob),
    top_logprobs: withTop
      ? tokens.map((t) =>
          Object.fromEntries((t.topLogprobs ?? []).map((a) => [tok.tokenText(a.id), a.logprob])),
        )
      : null,
    text_offset,
    sampling_logprobs: tokens.map((t) => t.samplingLogprob),
  };
}

export interface AssistantMessage {
  role: "assistant";
  content: string | null;
  tool_calls?: ToolCall[];
}

/**
 * `finish_reason` values: "stop" (EOS or a stop string), "length" (max_tokens or the context filled up),
 * "tool_calls" (chat, the reply parsed as tool calls), and "abort" as vLLM reports it: generation was cut
 * off (client gone, request deadline, server stopping), so the output is not a complete answer. A
 * truncated reply must never look like a normal stop to a trainer or an agent.
 */
export type ResponseFinishReason = "stop" | "length" | "tool_calls" | "abort";

export function assistantMessage(
  result: GenerateResult,
  parseTools: boolean,
  template: ChatEncoder,
  forced: readonly ForcedToolCall[] | null = null,
): { message: AssistantMessage; finishReason: ResponseFinishReason } {
  let parsed = parseTools ? template.parseToolCalls(result.text) : { content: result.text, toolCalls: [] };
  if (forced && parsed.toolCalls.length === 0) {
    const decode = (ids: readonly number[]) => template.tokenizer.decode(ids, { skipSpecialTokens: true });
    const fallback = forcedFallbackCall(forced, result.tokenIds, decode, newCallId);
    if (fallback) parsed = { content: fallback.content, toolCalls: [fallback.call] };
  }
  const message: AssistantMessage = { role: "assistant", content: parsed.content };
  if (parsed.toolCalls.length > 0) message.tool_calls = parsed.toolCalls;
  // An aborted generation may hold a complete call followed by more calls it never wrote: still "abort".
  const finishReason =
    result.finishReason === "abort"
      ? "abort"
      : parsed.toolCalls.length > 0
        ? "tool_calls"
        : completionFinishReason(result);
  return { message, finishReason };
}

export function completionFinishReason(result: GenerateResult): "stop" | "length" | "abort" {
  switch (result.finishReason) {
    case "length":
      return "length";
    case "abort":
      return "abort";
    case "stop":
      return "stop";
  }
}
