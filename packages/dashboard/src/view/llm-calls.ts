import {
  type CallDropReason,
  type ChatMessage,
  type Diagnostic,
  type ToolCall,
  TraceToTriplets,
  type TrajectorySequence,
  TripletsToTrajectories,
} from "@agl/adapter";
import type { Span, Triplet } from "@agl/core";
import { tokenTextOf } from "./token-text.js";

/** One LLM call of a rollout as the detail page shows it. */
export interface LlmCallView {
  spanId: string;
  spanName: string;
  model: string | null;
  family: string;
  input: ChatMessage[];
  output: ChatMessage[];
  toolCalls: ToolCall[];
  promptTokens: number | null;
  completionTokens: number | null;
  latencySeconds: number | null;
  finishReason: string | null;
  /** Did the adapter turn it into a triplet; if not, why. */
  kept: boolean;
  dropReason: CallDropReason | null;
  reward: number | null;
}

export interface RolloutAnalysis {
  calls: LlmCallView[];
  triplets: Triplet[];
  sequences: TrajectorySequence[];
  /** The adapter's diagnostics (trace-to-triplets, then triplets-to-trajectories). */
  diagnostics: Diagnostic[];
  /** Text of the token ids the spans give text for (see tokenTextOf). */
  tokenText: Map<number, string>;
}

const EMPTY: RolloutAnalysis = {
  calls: [],
  triplets: [],
  sequences: [],
  diagnostics: [],
  tokenText: new Map(),
};

/**
 * Run @agl/adapter on a rollout's spans, exactly as a trainer would: every candidate LLM call (kept or
 * dropped, with the reason), the triplets, the trajectory rows with observation masks, and diagnostics.
 */
export function analyzeRollout(spans: readonly Span[]): RolloutAnalysis {
  if (spans.length === 0) return EMPTY;
  const adapter = new TraceToTriplets();
  const analysis = adapter.analyze(spans.slice());
  const { output: triplets, diagnostics } = adapter.adaptWithDiagnostics(spans.slice());
  const trajectories = new TripletsToTrajectories().adaptWithDiagnostics(triplets);
  const calls = analysis.calls.map((c): LlmCallView => {
    const call = c.call;
    const s = c.node.span;
    const output = call?.output ?? [];
    return {
      spanId: c.node.id,
      spanName: s.name,
      model: call?.model ?? null,
      family: call?.family ?? "unreadable",
      input: call?.input ?? [],
      output,
      toolCalls: output.flatMap((m) => m.tool_calls ?? []),
      promptTokens: call?.usage?.inputTokens ?? call?.promptTokenIds?.length ?? null,
      completionTokens: call?.usage?.outputTokens ?? call?.responseTokenIds?.length ?? null,
      latencySeconds: s.start_time != null && s.end_time != null ? s.end_time - s.start_time : null,
      finishReason: call?.finishReason ?? null,
      kept: c.kept,
      dropReason: c.dropReason,
      reward: c.reward,
    };
  });
  return {
    calls,
    triplets,
    sequences: trajectories.output,
    diagnostics: [...diagnostics.diagnostics, ...trajectories.diagnostics.diagnostics],
    tokenText: tokenTextOf(spans),
  };
}

/** A message's text plus the tool calls it made, one `→ name(arguments)` line each. */
export function messageDisplay(message: ChatMessage): string {
  const calls = (message.tool_calls ?? []).map((t) => `→ ${t.function.name}(${t.function.arguments})`);
  return [messageText(message), ...calls].filter((line) => line !== "").join("\n");
}

/** Text of a message's content, whatever its shape (string, parts, null). */
export function messageText(message: ChatMessage): string {
  const content = message.content as unknown;
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .map((p) => {
        const part = p as { type?: string; text?: string; image_url?: { url?: string } };
        if (typeof part.text === "string") return part.text;
        if (part.image_url?.url) return `[image ${part.image_url.url.slice(0, 40)}]`;
        return JSON.stringify(p);
      })
      .join("");
  }
  return JSON.stringify(content);
}
