import type { CallKind } from "./openai-attributes.js";

interface ChoiceState {
  index: number;
  role?: string;
  text: string;
  finish_reason?: string | null;
  tool_calls: Map<number, { id?: string; type?: string; name: string; arguments: string }>;
  token_ids: number[];
  logprobs: unknown[];
  token_logprobs: number[];
  tokens: string[];
  prompt_token_ids?: number[];
}

/**
 * Rebuilds a full (non-streamed) response from stream chunks, so one attribute builder serves both:
 * content and tool-call arguments are concatenated, vLLM's per-chunk `token_ids` and logprobs appended,
 * prompt ids taken from whichever chunk carries them, usage from the final chunk.
 */
export class StreamAccumulator {
  private id?: string;
  private model?: string;
  private usage?: unknown;
  private promptIds?: number[];
  private readonly choices = new Map<number, ChoiceState>();

  constructor(private readonly kind: CallKind) {}

  add(chunk: any): void {
    if (!chunk || typeof chunk !== "object") return;
    this.id ??= chunk.id;
    this.model ??= chunk.model;
    if (chunk.usage) this.usage = chunk.usage;
    if (Array.isArray(chunk.prompt_token_ids)) this.promptIds ??= chunk.prompt_token_ids;
    for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
      const index = typeof c?.index === "number" ? c.index : 0;
      let s = this.choices.get(index);
      if (!s) {
        s = {
          index,
          text: "",
          tool_calls: new Map(),
          token_ids: [],
          logprobs: [],
          token_logprobs: [],
          tokens: [],
        };
        this.choices.set(index, s);
      }
      if (c.finish_reason) s.finish_reason = c.finish_reason;
      if (Array.isArray(c.token_ids)) s.token_ids.push(...c.token_ids);
      if (Array.isArray(c.prompt_token_ids)) s.prompt_token_ids ??= c.prompt_token_ids;
      if (this.kind === "chat") {
        const d = c.delta ?? {};
        if (d.role) s.role = d.role;
        if (typeof d.content === "string") s.text += d.content;
        for (const tc of Array.isArray(d.tool_calls) ? d.tool_calls : []) {
          const j = typeof tc?.index === "number" ? tc.index : s.tool_calls.size;
          const call = s.tool_calls.get(j) ?? { name: "", arguments: "" };
          if (tc.id) call.id = tc.id;
          if (tc.type) call.type = tc.type;
          if (tc.function?.name) call.name += tc.function.name;
          if (tc.function?.arguments) call.arguments += tc.function.arguments;
          s.tool_calls.set(j, call);
        }
        if (Array.isArray(c.logprobs?.content)) s.logprobs.push(...c.logprobs.content);
      } else {
        if (typeof c.text === "string") s.text += c.text;
        if (Array.isArray(c.logprobs?.token_logprobs)) s.token_logprobs.push(...c.logprobs.token_logprobs);
        if (Array.isArray(c.logprobs?.tokens)) s.tokens.push(...c.logprobs.tokens);
      }
    }
  }

  /** The equivalent non-streamed response. */
  toResponse(): Record<string, unknown> {
    const ordered = [...this.choices.values()].sort((a, b) => a.index - b.index);
    const choices = ordered.map((s) => {
      const ids = s.token_ids.length > 0 ? { token_ids: s.token_ids } : {};
      if (this.kind === "chat") {
        const toolCalls = [...s.tool_calls.entries()]
          .sort((a, b) => a[0] - b[0])
          .map(([, c]) => ({
            id: c.id,
            type: c.type ?? "function",
            function: { name: c.name, arguments: c.arguments },
          }));
        return {
          index: s.index,
          finish_reason: s.finish_reason ?? null,
          message: {
            role: s.role ?? "assistant",
            content: s.text.length > 0 || toolCalls.length === 0 ? s.text : null,
            ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}),
          },
          logprobs: s.logprobs.length > 0 ? { content: s.logprobs } : null,
          ...ids,
        };
      }
      return {
        index: s.index,
        finish_reason: s.finish_reason ?? null,
        text: s.text,
        logprobs:
          s.token_logprobs.length > 0
            ? { token_logprobs: s.token_logprobs, tokens: s.tokens.length ? s.tokens : undefined }
            : null,
        ...(s.prompt_token_ids ? { prompt_token_ids: s.prompt_token_ids } : {}),
        ...ids,
      };
    });
    return {
      id: this.id,
      model: this.model,
      choices,
      usage: this.usage,
      ...(this.promptIds ? { prompt_token_ids: this.promptIds } : {}),
    };
  }
}
