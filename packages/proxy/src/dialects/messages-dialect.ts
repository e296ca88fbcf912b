import { ChatChunkReader, type ChatStreamListener } from "./chat-chunk-reader.js";
import {
  type ClientDialect,
  choiceZero,
  type DialectStream,
  parseArguments,
  parseUpstreamJson,
  randomId,
  SseEncoder,
  type TranslatedResponse,
} from "./dialect.js";
import type { MessagesRequest } from "./messages-request.js";

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  529: "overloaded_error",
};

/** Anthropic's error body. */
export function anthropicError(status: number, message: string) {
  return { type: "error", error: { type: ERROR_TYPES[status] ?? "api_error", message } };
}

/** Serves `POST /v1/messages` (Anthropic Messages) over an upstream's chat/completions (see dialect.ts). */
export class MessagesDialect implements ClientDialect {
  readonly api = "messages" as const;
  readonly id = randomId("msg");

  constructor(private readonly request: MessagesRequest) {}

  /** Anthropic's stop_reason (and the matched stop sequence) for a chat finish. */
  stopReason(finish: string | null, stopReason: unknown, hasToolCalls: boolean) {
    if (hasToolCalls || finish === "tool_calls") return { stop_reason: "tool_use", stop_sequence: null };
    if (finish === "length") return { stop_reason: "max_tokens", stop_sequence: null };
    // vLLM reports the matched stop string as choices[].stop_reason
    if (typeof stopReason === "string" && this.request.stop_sequences?.includes(stopReason))
      return { stop_reason: "stop_sequence", stop_sequence: stopReason };
    return { stop_reason: "end_turn", stop_sequence: null };
  }

  usage(u: { prompt_tokens?: number; completion_tokens?: number } | null, promptIds?: number[] | null) {
    return {
      input_tokens: u?.prompt_tokens ?? promptIds?.length ?? 0,
      output_tokens: u?.completion_tokens ?? 0,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    };
  }

  translateResponse(status: number, upstream: Buffer, contentType: string): TranslatedResponse {
    const chat = parseUpstreamJson(upstream, contentType);
    if (status >= 400 || chat === null) {
      const code = status >= 400 ? status : 502;
      const message =
        typeof chat?.error?.message === "string" ? chat.error.message : `upstream answered HTTP ${status}`;
      return { status: code, body: Buffer.from(JSON.stringify(anthropicError(code, message))) };
    }
    const c0 = choiceZero(chat);
    const message = c0?.message ?? {};
    const content: unknown[] = [];
    if (typeof message.content === "string" && message.content !== "")
      content.push({ type: "text", text: message.content });
    const calls: any[] = Array.isArray(message.tool_calls) ? message.tool_calls : [];
    for (const t of calls) {
      content.push({
        type: "tool_use",
        id: String(t?.id ?? randomId("toolu")),
        name: String(t?.function?.name ?? ""),
        input: parseArguments(String(t?.function?.arguments ?? "")),
      });
    }
    const body = {
      id: this.id,
      type: "message",
      role: "assistant",
      model: chat.model ?? this.request.model,
      content,
      ...this.stopReason(c0?.finish_reason ?? null, c0?.stop_reason, calls.length > 0),
      usage: this.usage(chat.usage),
    };
    return { status: 200, body: Buffer.from(JSON.stringify(body)) };
  }

  errorBody(status: number, message: string): unknown {
    return anthropicError(status, message);
  }

  createStream(): DialectStream {
    return new MessagesStream(this, this.request.model);
  }
}

/** Re-encodes the upstream chat stream as Anthropic's message events. */
class MessagesStream extends SseEncoder implements DialectStream, ChatStreamListener {
  private readonly reader = new ChatChunkReader(this);
  private started = false;
  private closed = false;
  private model: unknown;
  private promptIds: number[] | null = null;
  /** The open content block: text, or a tool call (by its chat index). */
  private open: { index: number; kind: "text" } | { index: number; kind: "tool"; chatIndex: number } | null =
    null;
  private nextIndex = 0;
  private toolCount = 0;
  private finish: string | null = null;
  private stopReason: unknown;
  private usage: { prompt_tokens?: number; completion_tokens?: number } | null = null;

  constructor(
    private readonly d: MessagesDialect,
    model: string,
  ) {
    super();
    this.model = model;
  }

  private emit(type: string, data: Record<string, unknown>): void {
    this.write(type, data);
  }

  private begin(): void {
    if (this.started) return;
    this.started = true;
    this.emit("message_start", {
      message: {
        id: this.d.id,
        type: "message",
        role: "assistant",
        model: this.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: this.d.usage(null, this.promptIds),
      },
    });
  }

  push(chunk: Buffer): string {
    this.reader.push(chunk);
    return this.take();
  }

  onStart(head: { model: unknown; promptTokenIds: number[] | null }): void {
    if (typeof head.model === "string") this.model = head.model;
    this.promptIds = head.promptTokenIds;
    this.begin();
  }

  private closeBlock(): void {
    if (!this.open) return;
    this.emit("content_block_stop", { index: this.open.index });
    this.open = null;
  }

  onText(delta: string): void {
    if (this.open?.kind !== "text") {
      this.closeBlock();
      this.open = { index: this.nextIndex++, kind: "text" };
      this.emit("content_block_start", { index: this.open.index, content_block: { type: "text", text: "" } });
    }
    this.emit("content_block_delta", { index: this.open.index, delta: { type: "text_delta", text: delta } });
  }

  onToolCall(index: number, id: string, name: string): void {
    this.closeBlock();
    this.toolCount++;
    this.open = { index: this.nextIndex++, kind: "tool", chatIndex: index };
    this.emit("content_block_start", {
      index: this.open.index,
      content_block: { type: "tool_use", id, name, input: {} },
    });
  }

  onToolArguments(index: number, delta: string): void {
    if (this.open?.kind !== "tool" || this.open.chatIndex !== index) return;
    this.emit("content_block_delta", {
      index: this.open.index,
      delta: { type: "input_json_delta", partial_json: delta },
    });
  }

  onFinish(finishReason: string, stopReason: unknown): void {
    this.finish = finishReason;
    this.stopReason = stopReason;
  }

  onUsage(usage: { prompt_tokens?: number; completion_tokens?: number }): void {
    this.usage = usage;
  }

  onUpstreamError(error: unknown): void {
    this.failWith(`upstream stream error: ${JSON.stringify(error)}`);
  }

  private failWith(message: string): void {
    if (this.closed) return;
    this.closed = true;
    this.emit("error", { error: { type: "api_error", message } });
  }

  end(): string {
    if (this.closed) return this.take();
    if (!this.reader.finished) {
      this.failWith("upstream stream ended before the message finished");
      return this.take();
    }
    this.closed = true;
    this.begin();
    this.closeBlock();
    const usage = this.d.usage(this.usage, this.promptIds);
    this.emit("message_delta", {
      delta: this.d.stopReason(this.finish, this.stopReason, this.toolCount > 0),
      usage: { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens },
    });
    this.emit("message_stop", {});
    return this.take();
  }

  fail(message: string): string {
    this.failWith(message);
    return this.take();
  }
}
