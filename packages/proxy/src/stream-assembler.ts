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

/**
 * Rebuilds the non-streamed response from OpenAI/vLLM SSE chunks (prompt ids on the first chunk, output ids
 * and logprobs per chunk, usage on the last), so a streamed call is recorded exactly as a non-streamed one.
 * Fed the raw bytes as they are relayed; tolerant of chunks the client never sees completed.
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

  constructor(isChat: boolean) {
    this.isChat = isChat;
    this.parser = createParser({ onEvent: (event) => this.onData(event.data) });
  }

  push(bytes: Buffer): void {
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
    const a = this.acc(typeof c.index === "number" ? c.index : 0);
    if (c.finish_reason) a.finishReason = c.finish_reason;
    if (c.stop_reason !== undefined && c.stop_reason !== null) a.stopReason = c.stop_reason;
    if (Array.isArray(c.token_ids)) (a.tokenIds ??= []).push(...c.token_ids);
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
          const i = typeof t?.index === "number" ? t.index : a.toolCalls.length;
          const call = (a.toolCalls[i] ??= { function: { name: "", arguments: "" } });
          if (t.id) call.id = t.id;
          if (t.type) call.type = t.type;
          if (t.function?.name) call.function.name += t.function.name;
          if (typeof t.function?.arguments === "string") call.function.arguments += t.function.arguments;
        }
      }
      if (lp && Array.isArray(lp.content)) (a.logprobContent ??= []).push(...lp.content);
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
          if (Array.isArray(lp[key])) acc[key].push(...lp[key]);
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
