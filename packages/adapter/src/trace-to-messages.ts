import type { Span } from "@agl/core";
import type { AdapterResult, DiagnosingAdapter } from "./adapter.js";
import { attrs } from "./conventions.js";
import { DiagnosticsCollector } from "./diagnostics.js";
import { type ChatMessage, canonicalArguments, type ToolCall, type ToolDefinition } from "./llm-call.js";
import { checkSpans, parseOptions, TraceToMessagesOptionsSchema } from "./options.js";
import { readLlmCall } from "./readers/index.js";
import { type SpanPattern, spanMatcher } from "./trace-to-triplets.js";

/** One fine-tuning example in OpenAI's chat format. */
export interface MessagesExample {
  messages: ChatMessage[];
  tools: ToolDefinition[];
}

export interface TraceToMessagesOptions {
  /** Which spans are LLM calls; default "auto" (every convention the readers know). */
  llmCallMatch?: SpanPattern | "auto";
}

/**
 * Every LLM call → `{messages, tools}`: the prompt messages followed by the first completion.
 * When a completion records no tool calls but the span has direct children describing tool calls
 * (`tool.name`, `tool.parameters`, `tool.call.id`, `tool.call.type`, as AgentOps writes them), those
 * become the assistant message's `tool_calls`. Calls are de-duplicated by response id.
 */
export class TraceToMessages implements DiagnosingAdapter<Span[], MessagesExample[]> {
  readonly name = "TraceToMessages";
  private readonly isLlmCall: (span: Span) => boolean;

  constructor(options: TraceToMessagesOptions = {}) {
    parseOptions(TraceToMessagesOptionsSchema, options, "options");
    this.isLlmCall = spanMatcher(options.llmCallMatch ?? "auto");
  }

  adapt(spans: Span[]): MessagesExample[] {
    return this.adaptWithDiagnostics(spans).output;
  }

  adaptWithDiagnostics(spans: Span[]): AdapterResult<MessagesExample[]> {
    checkSpans(spans);
    const diagnostics = new DiagnosticsCollector();
    const children = new Map<string, Span[]>();
    for (const s of spans) {
      if (!s.parent_id) continue;
      const list = children.get(s.parent_id);
      if (list) list.push(s);
      else children.set(s.parent_id, [s]);
    }
    const seen = new Set<string>();
    const out: MessagesExample[] = [];
    for (const span of spans) {
      if (!this.isLlmCall(span)) continue;
      const call = readLlmCall(span);
      if (!call || (call.input.length === 0 && call.output.length === 0)) {
        diagnostics.add(
          "message_conversion",
          "warning",
          `LLM span "${span.name}" has no readable messages; skipped`,
          {
            spanId: span.span_id,
            spanName: span.name,
          },
        );
        continue;
      }
      if (call.responseId) {
        if (seen.has(call.responseId)) continue;
        seen.add(call.responseId);
      }
      const messages = call.input.slice();
      const completion = call.output[0];
      if (completion) {
        const reply: ChatMessage = { ...completion, role: completion.role || "assistant" };
        if (!reply.tool_calls?.length) {
          const fromChildren = toolCallsFromChildren(children.get(span.span_id) ?? []);
          if (fromChildren.length) {
            reply.tool_calls = fromChildren;
            if (reply.content === "") reply.content = null;
          }
        }
        messages.push(reply);
      } else {
        diagnostics.add(
          "message_conversion",
          "info",
          `LLM span "${span.name}" has no completion; example ends with the prompt`,
          {
            spanId: span.span_id,
            spanName: span.name,
          },
        );
      }
      out.push({ messages, tools: call.tools });
    }
    return { output: out, diagnostics: diagnostics.report() };
  }
}

function toolCallsFromChildren(spans: Span[]): ToolCall[] {
  const calls: ToolCall[] = [];
  for (const child of spans) {
    const a = attrs(child);
    const name = a["tool.name"];
    if (typeof name !== "string") continue;
    calls.push({
      id: typeof a["tool.call.id"] === "string" ? (a["tool.call.id"] as string) : null,
      type: "function",
      function: { name, arguments: canonicalArguments(a["tool.parameters"]) },
    });
  }
  return calls;
}
