import { createParser, type EventSourceParser } from "eventsource-parser";

interface ChoiceAcc {
  index: number;
  role: string | null;
  content: string;
  sawContent: boolean;
  text: string;
  toolCalls: Array<{ id?: string; type?: string; function: { name: string; arguments: string } }>;
  finishReason: string | null;
  tokenIds: number[] | null;
  promptTokenIds: number[] | null;
  logprobContent: unknown[] | null;
  completionLogprobs: {
    tokens: unknown[];
    token_logprobs: unknown[];
    top_logprobs: unknown[];
    text_offset: unknown[];
  } | null;
  stopReason: unknown;
}

export interface StreamAssemblerLimits {
  /** Highest choice index + 1 recorded (default 128); chunks for others are ignored. */
  maxChoices?: number;
  /** Highest tool-call index + 1 recorded per choice (default 128). */
  maxToolCalls?: number;
  /** Stream bytes assembled (default 64 MiB); past them the record stops and is marked truncated. */
  maxBytes?: number;
}

const DEFAULT_LIMITS: Required<StreamAssemblerLimits> = {
  maxChoices: 128,
  maxToolCalls: 128,
  maxBytes: 64 * 1024 * 1024,
};

/** Append without spreading: a hostile chunk's array could exceed the engine's argument limit. */
function append(target: unknown[], items: readonly unknown[]): void {
  for (const item of items) target.push(item);
}

const validIndex = (value: unknown, limit: number): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 && value < limit;

/**
 * Rebuilds the non-streamed response from OpenAI/vLLM SSE chunks (prompt ids on the first chunk, output ids
 * and logprobs per chunk, usage on the last), so a streamed call is recorded exactly as a non-streamed one.
 * Fed the raw bytes as they are relayed; tolerant of chunks the client never sees completed. Bounded:
 * one upstream chunk cannot make it allocate or loop beyond its limits (indexes, bytes); what exceeds
 * them is ignored (`ignored`) or ends the recording (`truncated`), never the relay.
 */
export class StreamAssembler {
  readonly isChat: boolean;
  private readonly parser: EventSourceParser;
  private readonly decoder = new TextDecoder();
  private readonly choices = new Map<number, ChoiceAcc>();
  private head: { id?: unknown; created?: unknown; model?: unknown; system_fingerprint?: unknown } | null =
    null;
  private promptTokenIds: number[] | null = null;
  private usage: unknown = null;
  /** Chunks received, `[DONE]` seen, and any `error` event relayed from upstream. */
  chunks = 0;
  done = false;
  firstChunkAt: number | null = null;
  upstreamError: unknown = null;
  malformed = 0;
  /** Choices or tool calls dropped for an index outside the limits. */
  ignored = 0;
  /** Why recording stopped early (the stream itself is relayed in full), or null. */
  truncated: string | null = null;
  private readonly limits: Required<StreamAssemblerLimits>;
  private bytes = 0;

  constructor(isChat: boolean, limits: StreamAssemblerLimits = {}) {
    this.isChat = isChat;
    this.limits = { ...DEFAULT_LIMITS, ...limits };
    this.parser = createParser({ onEvent: (event) => this.onData(event.data) });
  }

  push(bytes: Buffer): void {
    if (this.truncated !== null) return;
    this.bytes += bytes.length;
    if (this.bytes > this.limits.maxBytes) {
      this.truncated = `stream longer than ${this.limits.maxBytes} bytes`;
      return;
    }
    this.parser.feed(this.decoder.decode(bytes, { stream: true }));
  }

  private onData(data: string): void {
    if (data === "[DONE]") {
      this.done = true;
      return;
    }
    let chunk: any;
    try {
      chunk = JSON.parse(data);
    } catch {
      this.malformed++;
      return;
    }
    if (chunk === null || typeof chunk !== "object") return;
    if (this.firstChunkAt === null) this.firstChunkAt = performance.now();
    this.chunks++;
    if (chunk.error !== undefined) {
      this.upstreamError = chunk.error;
      return;
    }
    if (this.head === null) {
      this.head = {
        id: chunk.id,
        created: chunk.created,
        model: chunk.model,
        system_fingerprint: chunk.system_fingerprint,
      };
    }
    if (Array.isArray(chunk.prompt_token_ids) && this.promptTokenIds === null) {
      this.promptTokenIds = chunk.prompt_token_ids;
    }
    if (chunk.usage) this.usage = chunk.usage;
    if (!Array.isArray(chunk.choices)) return;
    for (const c of chunk.choices) this.onChoice(c);
  }

  private acc(index: number): ChoiceAcc {
    let a = this.choices.get(index);
    if (!a) {
      a = {
        index,
        role: null,
        content: "",
        sawContent: false,
        text: "",
        toolCalls: [],
        finishReason: null,
        tokenIds: null,
        promptTokenIds: null,
        logprobContent: null,
        completionLogprobs: null,
        stopReason: undefined,
      };
      this.choices.set(index, a);
    }
    return a;
  }

  private onChoice(c: any): void {
    if (!c || typeof c !== "object") return;
    const index = c.index ?? 0;
    if (!validIndex(index, this.limits.maxChoices)) {
      this.ignored++;
      return;
    }
    const a = this.acc(index);
    if (c.finish_reason) a.finishReason = c.finish_reason;
    if (c.stop_reason !== undefined && c.stop_reason !== null) a.stopReason = c.stop_reason;
    if (Array.isArray(c.token_ids)) append((a.tokenIds ??= []), c.token_ids);
    if (Array.isArray(c.prompt_token_ids) && a.promptTokenIds === null) a.promptTokenIds = c.prompt_token_ids;
    const lp = c.logprobs;
    if (this.isChat) {
      const d = c.delta ?? {};
      if (typeof d.role === "string") a.role = d.role;
      if (typeof d.content === "string") {
        a.content += d.content;
        if (d.content !== "") a.sawContent = true;
      }
      if (Array.isArray(d.tool_calls)) {
        for (const t of d.tool_calls) {
          if (!t || typeof t !== "object") continue;
          const i = t.index ?? a.toolCalls.length;
          if (!validIndex(i, this.limits.maxToolCalls)) {
            this.ignored++;
            continue;
          }
          const call = (a.toolCalls[i] ??= { function: { name: "", arguments: "" } });
          if (t.id) call.id = t.id;
          if (t.type) call.type = t.type;
          if (t.function?.name) call.function.name += t.function.name;
          if (typeof t.function?.arguments === "string") call.function.arguments += t.function.arguments;
        }
      }
      if (lp && Array.isArray(lp.content)) append((a.logprobContent ??= []), lp.content);
    } else {
      if (typeof c.text === "string") a.text += c.text;
      if (lp && typeof lp === "object") {
        const acc = (a.completionLogprobs ??= {
          tokens: [],
          token_logprobs: [],
          top_logprobs: [],
          text_offset: [],
        });
        for (const key of ["tokens", "token_logprobs", "top_logprobs", "text_offset"] as const) {
          if (Array.isArray(lp[key])) append(acc[key], lp[key]);
        }
      }
    }
  }

  /** The response a non-streamed call would have returned (as far as the stream got). */
  result(): Record<string, unknown> {
    const choices = [...this.choices.values()]
      .sort((x, y) => x.index - y.index)
      .map((a) => {
        const base: Record<string, unknown> = this.isChat
          ? {
              index: a.index,
              message: {
                role: a.role ?? "assistant",
                // a pure tool-call answer is streamed with an empty content delta but is null when not streamed
                content: a.sawContent || a.toolCalls.length === 0 ? a.content : null,
                ...(a.toolCalls.length
                  ? {
                      tool_calls: a.toolCalls.map((t) => ({
                        id: t.id,
                        type: t.type ?? "function",
                        function: t.function,
                      })),
                    }
                  : {}),
              },
              finish_reason: a.finishReason,
              logprobs: a.logprobContent ? { content: a.logprobContent } : null,
            }
          : {
              index: a.index,
              text: a.text,
              finish_reason: a.finishReason,
              logprobs: a.completionLogprobs,
              ...(a.promptTokenIds ? { prompt_token_ids: a.promptTokenIds } : {}),
            };
        if (a.stopReason !== undefined) base.stop_reason = a.stopReason;
        if (a.tokenIds) base.token_ids = a.tokenIds;
        return base;
      });
    return {
      id: this.head?.id,
      object: this.isChat ? "chat.completion" : "text_completion",
      created: this.head?.created,
      model: this.head?.model,
      choices,
      usage: this.usage,
      ...(this.promptTokenIds ? { prompt_token_ids: this.promptTokenIds } : {}),
    };
  }
}
