import { createParser, type EventSourceParser } from "eventsource-parser";

/** What a client dialect hears from an upstream chat/completions stream (choice 0 only: no `n` there). */
export interface ChatStreamListener {
  /** First chunk: the upstream's id, model and (vLLM) prompt token ids. */
  onStart(head: { id: unknown; model: unknown; promptTokenIds: number[] | null }): void;
  onText(delta: string, logprobs: unknown[] | null): void;
  /** A tool call's first delta (id and name), then its argument fragments. */
  onToolCall(index: number, id: string, name: string): void;
  onToolArguments(index: number, delta: string): void;
  onFinish(finishReason: string, stopReason: unknown): void;
  onUsage(usage: { prompt_tokens?: number; completion_tokens?: number }): void;
  onUpstreamError(error: unknown): void;
}

/**
 * Parses the bytes of an OpenAI/vLLM chat SSE stream into the events a client dialect (Responses,
 * Anthropic Messages) re-encodes. Tool-call deltas are keyed by their `index`, as OpenAI streams them.
 */
export class ChatChunkReader {
  private readonly parser: EventSourceParser;
  private readonly decoder = new TextDecoder();
  private readonly toolIndexes = new Set<number>();
  private started = false;
  /** `[DONE]` seen. */
  done = false;
  /** A finish_reason seen on choice 0. */
  finished = false;

  constructor(private readonly listener: ChatStreamListener) {
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
      return;
    }
    if (chunk === null || typeof chunk !== "object") return;
    if (chunk.error !== undefined) {
      this.listener.onUpstreamError(chunk.error);
      return;
    }
    if (!this.started) {
      this.started = true;
      this.listener.onStart({
        id: chunk.id,
        model: chunk.model,
        promptTokenIds: Array.isArray(chunk.prompt_token_ids) ? chunk.prompt_token_ids : null,
      });
    }
    const choice = Array.isArray(chunk.choices)
      ? chunk.choices.find((c: any) => (c?.index ?? 0) === 0)
      : undefined;
    if (choice) this.onChoice(choice);
    if (chunk.usage && typeof chunk.usage === "object") this.listener.onUsage(chunk.usage);
  }

  private onChoice(c: any): void {
    const delta = c.delta ?? {};
    const logprobs = Array.isArray(c.logprobs?.content) ? c.logprobs.content : null;
    if (typeof delta.content === "string" && delta.content !== "")
      this.listener.onText(delta.content, logprobs);
    if (Array.isArray(delta.tool_calls)) {
      for (const t of delta.tool_calls) {
        const index = typeof t?.index === "number" ? t.index : this.toolIndexes.size;
        if (!this.toolIndexes.has(index)) {
          this.toolIndexes.add(index);
          this.listener.onToolCall(index, String(t?.id ?? `call_${index}`), String(t?.function?.name ?? ""));
        }
        const args = t?.function?.arguments;
        if (typeof args === "string" && args !== "") this.listener.onToolArguments(index, args);
      }
    }
    if (typeof c.finish_reason === "string" && c.finish_reason) {
      this.finished = true;
      this.listener.onFinish(c.finish_reason, c.stop_reason);
    }
  }
}
