import type { Attributes } from "@agl/core";
import { ChatChunkReader, type ChatStreamListener } from "./chat-chunk-reader.js";
import {
  type ClientDialect,
  choiceZero,
  type DialectStream,
  parseUpstreamJson,
  randomId,
  SseEncoder,
  type TranslatedResponse,
} from "./dialect.js";
import type { ResponseHistory, ResponseScope } from "./response-history.js";
import {
  assistantMessage,
  functionCallItem,
  messageItem,
  type ResponseIds,
  responseIds,
  stateAttributes,
  type ToolCallOut,
} from "./response-state.js";
import type { ResponsesRequest } from "./responses-request.js";

/** What one chat answer (choice 0) amounts to, however it arrived. */
interface ChatOutcome {
  model: unknown;
  text: string;
  logprobs: unknown[] | null;
  toolCalls: ToolCallOut[];
  finishReason: string | null;
  usage: { prompt_tokens?: number; completion_tokens?: number } | null;
}

/** Serves `POST /v1/responses` over an upstream's chat/completions (see dialect.ts). */
export class ResponsesDialect implements ClientDialect {
  readonly api = "responses" as const;
  /** The response and output item ids, named after the call's span so any proxy can find them. */
  readonly ids: ResponseIds;
  readonly id: string;
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private readonly wantLogprobs: boolean;
  /** Set once the answer is remembered: what the span records for other proxies. */
  private remembered: Attributes | null = null;

  constructor(
    private readonly request: ResponsesRequest,
    /** The chat messages sent upstream (instructions first, when given). */
    private readonly messages: unknown[],
    /** The conversation sent (without instructions), extended by the answer for previous_response_id. */
    private readonly conversation: unknown[],
    private readonly history: ResponseHistory,
    private readonly scope: ResponseScope | null,
    spanId: string,
  ) {
    this.ids = responseIds(spanId);
    this.id = this.ids.response;
    this.wantLogprobs =
      (request.include ?? []).includes("message.output_text.logprobs") || (request.top_logprobs ?? 0) > 0;
  }

  translateResponse(status: number, upstream: Buffer, contentType: string): TranslatedResponse {
    const chat = parseUpstreamJson(upstream, contentType);
    if (status >= 400 || chat === null) {
      // OpenAI's error shape is the Responses API's too; pass a JSON error through, wrap anything else
      const body = chat?.error
        ? chat
        : this.errorBody(status >= 400 ? status : 502, "upstream answered no JSON");
      return { status: status >= 400 ? status : 502, body: Buffer.from(JSON.stringify(body)) };
    }
    const c0 = choiceZero(chat);
    const message = c0?.message ?? {};
    const outcome: ChatOutcome = {
      model: chat.model,
      text: typeof message.content === "string" ? message.content : "",
      logprobs: Array.isArray(c0?.logprobs?.content) ? c0.logprobs.content : null,
      toolCalls: (Array.isArray(message.tool_calls) ? message.tool_calls : []).map((t: any) => ({
        id: String(t?.id ?? randomId("call")),
        name: String(t?.function?.name ?? ""),
        arguments: String(t?.function?.arguments ?? ""),
      })),
      finishReason: c0?.finish_reason ?? null,
      usage: chat.usage ?? null,
    };
    const output = this.outputItems(outcome, "completed");
    const response = this.responseObject(outcome, output);
    this.remember(outcome, output);
    return { status: 200, body: Buffer.from(JSON.stringify(response)) };
  }

  errorBody(status: number, message: string): unknown {
    return {
      error: {
        message,
        type: status >= 500 ? "server_error" : "invalid_request_error",
        param: null,
        code: null,
      },
    };
  }

  createStream(): DialectStream {
    return new ResponsesStream(this);
  }

  /** Output items of a finished answer: the message (if any text), then one item per function call. */
  outputItems(o: ChatOutcome, status: "completed" | "in_progress"): unknown[] {
    const items: unknown[] = [];
    if (o.text !== "" || o.toolCalls.length === 0) {
      items.push(this.messageItem(this.ids.message, o.text, o.logprobs, status));
    }
    for (const [i, t] of o.toolCalls.entries()) {
      items.push(this.functionCallItem(this.ids.call(i), t, status));
    }
    return items;
  }

  messageItem(id: string, text: string, logprobs: unknown[] | null, status: string) {
    return messageItem(id, text, status, this.textPart(text, logprobs));
  }

  textPart(text: string, logprobs: unknown[] | null) {
    return {
      type: "output_text",
      text,
      annotations: [],
      ...(this.wantLogprobs ? { logprobs: responsesLogprobs(logprobs) } : {}),
    };
  }

  functionCallItem(id: string, t: ToolCallOut, status: string) {
    return functionCallItem(id, t, status);
  }

  /** The response object (as returned, or inside `response.created`/`.completed` events). */
  responseObject(o: ChatOutcome | null, output: unknown[], failure?: string): Record<string, unknown> {
    const r = this.request;
    const incomplete = o?.finishReason === "length";
    const status = failure ? "failed" : o === null ? "in_progress" : incomplete ? "incomplete" : "completed";
    const usage = o?.usage;
    return {
      id: this.id,
      object: "response",
      created_at: this.createdAt,
      status,
      error: failure ? { code: "server_error", message: failure } : null,
      incomplete_details: incomplete ? { reason: "max_output_tokens" } : null,
      instructions: r.instructions ?? null,
      max_output_tokens: r.max_output_tokens ?? null,
      model: typeof o?.model === "string" ? o.model : r.model,
      output,
      parallel_tool_calls: r.parallel_tool_calls ?? true,
      previous_response_id: r.previous_response_id ?? null,
      reasoning: { effort: null, summary: null },
      store: r.store ?? true,
      temperature: r.temperature ?? 1,
      text: { format: r.text?.format ?? { type: "text" } },
      tool_choice: r.tool_choice ?? "auto",
      tools: r.tools ?? [],
      top_p: r.top_p ?? 1,
      truncation: "disabled",
      usage: usage
        ? {
            input_tokens: usage.prompt_tokens ?? 0,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: usage.completion_tokens ?? 0,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: (usage.prompt_tokens ?? 0) + (usage.completion_tokens ?? 0),
          }
        : null,
      user: null,
      metadata: (r as any).metadata ?? {},
    };
  }

  /** Keep the conversation and its items for `previous_response_id`/`item_reference` (unless `store: false`). */
  remember(o: ChatOutcome, output: unknown[]): void {
    if (this.request.store === false) return;
    const items = output.map((item) => [(item as { id: string }).id, item] as [string, unknown]);
    const conversation = [...this.conversation, assistantMessage(o.text, o.toolCalls)];
    this.history.remember(this.scope, this.id, conversation, items);
    const start = this.messages.length - this.conversation.length;
    const itemIds = items.map(([id]) => id);
    this.remembered = stateAttributes(this.ids, this.messages, start, o.toolCalls, itemIds);
  }

  /** The attributes that let any proxy on the store restore this response (null unless remembered). */
  spanAttributes(): Attributes | null {
    return this.scope ? this.remembered : null;
  }
}

/** Responses logprobs from chat ones: `{token, logprob, bytes, top_logprobs}` per token. */
function responsesLogprobs(content: unknown[] | null): unknown[] {
  return (content ?? []).map((x: any) => ({
    token: String(x?.token ?? ""),
    logprob: x?.logprob,
    bytes: Array.isArray(x?.bytes) ? x.bytes : [],
    top_logprobs: Array.isArray(x?.top_logprobs)
      ? x.top_logprobs.map((t: any) => ({ token: t?.token, logprob: t?.logprob, bytes: t?.bytes ?? [] }))
      : [],
  }));
}

/** Re-encodes the upstream chat stream as the Responses event stream. */
class ResponsesStream extends SseEncoder implements DialectStream, ChatStreamListener {
  private readonly reader = new ChatChunkReader(this);
  private seq = 0;
  private started = false;
  private readonly outcome: ChatOutcome = {
    model: undefined,
    text: "",
    logprobs: null,
    toolCalls: [],
    finishReason: null,
    usage: null,
  };
  private messageIndex: number | null = null;
  private messageOpen = false;
  private nextIndex = 0;
  /** The open function call: its chat tool index and output index. */
  private openCall: { chatIndex: number; outputIndex: number; call: number } | null = null;
  private readonly callByChatIndex = new Map<number, number>();
  /** What each output index holds: the message, or a function call's index. */
  private readonly order: Array<"message" | number> = [];
  private closed = false;

  constructor(private readonly d: ResponsesDialect) {
    super();
  }

  private emit(type: string, data: Record<string, unknown>): void {
    this.write(type, { sequence_number: this.seq++, ...data });
  }

  private begin(): void {
    if (this.started) return;
    this.started = true;
    const response = this.d.responseObject(null, []);
    this.emit("response.created", { response });
    this.emit("response.in_progress", { response });
  }

  push(chunk: Buffer): string {
    this.begin();
    this.reader.push(chunk);
    return this.take();
  }

  onStart(head: { model: unknown }): void {
    this.outcome.model = head.model;
  }

  onText(delta: string, logprobs: unknown[] | null): void {
    if (this.messageIndex === null) {
      this.closeCall();
      this.messageIndex = this.nextIndex++;
      this.order[this.messageIndex] = "message";
      this.messageOpen = true;
      const item = this.d.messageItem(this.d.ids.message, "", null, "in_progress");
      this.emit("response.output_item.added", {
        output_index: this.messageIndex,
        item: { ...item, content: [] },
      });
      this.emit("response.content_part.added", {
        item_id: this.d.ids.message,
        output_index: this.messageIndex,
        content_index: 0,
        part: this.d.textPart("", null),
      });
    }
    this.outcome.text += delta;
    if (logprobs) (this.outcome.logprobs ??= []).push(...logprobs);
    this.emit("response.output_text.delta", {
      item_id: this.d.ids.message,
      output_index: this.messageIndex,
      content_index: 0,
      delta,
      logprobs: logprobs ? responsesLogprobs(logprobs) : [],
    });
  }

  private closeMessage(): void {
    if (!this.messageOpen || this.messageIndex === null) return;
    this.messageOpen = false;
    const o = this.outcome;
    const base = { item_id: this.d.ids.message, output_index: this.messageIndex, content_index: 0 };
    this.emit("response.output_text.done", {
      ...base,
      text: o.text,
      logprobs: responsesLogprobs(o.logprobs),
    });
    this.emit("response.content_part.done", { ...base, part: this.d.textPart(o.text, o.logprobs) });
    this.emit("response.output_item.done", {
      output_index: this.messageIndex,
      item: this.d.messageItem(this.d.ids.message, o.text, o.logprobs, "completed"),
    });
  }

  onToolCall(index: number, id: string, name: string): void {
    this.closeMessage();
    this.closeCall();
    const call = this.outcome.toolCalls.push({ id, name, arguments: "" }) - 1;
    this.callByChatIndex.set(index, call);
    this.openCall = { chatIndex: index, outputIndex: this.nextIndex++, call };
    this.order[this.openCall.outputIndex] = call;
    this.emit("response.output_item.added", {
      output_index: this.openCall.outputIndex,
      item: this.d.functionCallItem(this.d.ids.call(call), this.outcome.toolCalls[call]!, "in_progress"),
    });
  }

  onToolArguments(index: number, delta: string): void {
    const call = this.callByChatIndex.get(index);
    if (call === undefined) return;
    this.outcome.toolCalls[call]!.arguments += delta;
    if (this.openCall?.call !== call) return; // a late fragment of a closed call: kept, not re-streamed
    this.emit("response.function_call_arguments.delta", {
      item_id: this.d.ids.call(call),
      output_index: this.openCall.outputIndex,
      delta,
    });
  }

  private closeCall(): void {
    const open = this.openCall;
    if (!open) return;
    this.openCall = null;
    const t = this.outcome.toolCalls[open.call]!;
    const itemId = this.d.ids.call(open.call);
    this.emit("response.function_call_arguments.done", {
      item_id: itemId,
      output_index: open.outputIndex,
      name: t.name,
      arguments: t.arguments,
    });
    this.emit("response.output_item.done", {
      output_index: open.outputIndex,
      item: this.d.functionCallItem(itemId, t, "completed"),
    });
  }

  onFinish(finishReason: string): void {
    this.outcome.finishReason = finishReason;
  }

  onUsage(usage: { prompt_tokens?: number; completion_tokens?: number }): void {
    this.outcome.usage = usage;
  }

  onUpstreamError(error: unknown): void {
    this.failWith(`upstream stream error: ${JSON.stringify(error)}`);
  }

  private failWith(message: string): void {
    if (this.closed) return;
    this.closed = true;
    this.begin();
    const output = this.d.outputItems(this.outcome, "in_progress");
    this.emit("response.failed", { response: this.d.responseObject(this.outcome, output, message) });
    // the `error` field makes the OpenAI SDK throw instead of accepting a truncated answer
    this.emit("error", {
      code: "server_error",
      message,
      param: null,
      error: { type: "server_error", message },
    });
  }

  end(): string {
    if (this.closed) return this.take();
    if (!this.reader.finished) {
      this.failWith("upstream stream ended before the response finished");
      return this.take();
    }
    this.closed = true;
    this.begin();
    // an empty answer is still one (empty) message, as when not streamed
    if (this.messageIndex === null && this.outcome.toolCalls.length === 0) this.onText("", null);
    this.closeMessage();
    this.closeCall();
    const o = this.outcome;
    const output = this.order.map((what) =>
      what === "message"
        ? this.d.messageItem(this.d.ids.message, o.text, o.logprobs, "completed")
        : this.d.functionCallItem(this.d.ids.call(what), o.toolCalls[what]!, "completed"),
    );
    const response = this.d.responseObject(o, output);
    this.emit(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
    this.d.remember(o, output);
    return this.take();
  }

  fail(message: string): string {
    this.failWith(message);
    return this.take();
  }
}
