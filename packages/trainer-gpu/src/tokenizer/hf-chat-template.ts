import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { InvalidArgumentError, parseOrThrow } from "@agl/core";
import { Template } from "@huggingface/jinja";
import { z } from "zod";
import { PretrainedCheckpointError } from "../pretrained/errors.js";
import { parseHermesToolCalls } from "./hermes-tool-calls.js";
import type { HfTokenizer } from "./hf-tokenizer.js";
import {
  type ChatMessage,
  ChatMessageSchema,
  type ParsedChatMessage,
  type ToolDefinition,
  ToolSchema,
} from "./messages.js";
import type { ChatEncoder, EncodeChatOptions, EncodedChat } from "./text-tokenizer.js";
import { tokenByteLengths } from "./token-bytes.js";
import type { ParsedAssistantOutput } from "./tool-calls.js";

/**
 * A checkpoint's chat template (`chat_template.jinja`, or `chat_template` in tokenizer_config.json)
 * rendered with `@huggingface/jinja` and tokenized in one piece, as `apply_chat_template(messages,
 * tools=tools, add_generation_prompt=..., tokenize=True)` does: the template sees `messages`, `tools`,
 * `add_generation_prompt`, the special token strings (`bos_token`, `eos_token`, ...), plus any
 * `extraContext` (e.g. `{ enable_thinking: false }` for Qwen3); `raise_exception` and `strftime_now` are
 * the jinja library's globals. A template error (e.g. `raise_exception`) is an InvalidArgumentError.
 *
 * OpenAI messages are handed to the template the way vLLM hands them: content parts joined with "\n",
 * null content as "", assistant `tool_calls[].function.arguments` parsed from their JSON string into an
 * object (so templates that `tojson` the arguments print JSON, not a quoted string); tool definitions are
 * passed exactly as the client sent them.
 *
 * The assistant mask marks the tokens of each assistant turn from the end of the generation prompt that
 * precedes it (the chat rendered up to that turn with `add_generation_prompt=True`) through the first
 * eos token after it — what the model itself has to produce. Templates whose earlier turns change when a
 * turn is appended cannot be masked that way; they get a clear error when trained on.
 */

export interface HfChatTemplateOptions {
  /** Use this template instead of the checkpoint's. */
  template?: string;
  /** Extra template variables (`enable_thinking`, `date_string`, ...). */
  extraContext?: Record<string, unknown>;
}

type NamedTemplates = Array<{ name: string; template: string }>;

export class HfChatTemplate implements ChatEncoder {
  private readonly compiled = new Map<string, Template>();
  private readonly source: string | NamedTemplates;
  readonly extraContext: Record<string, unknown>;

  constructor(
    readonly tokenizer: HfTokenizer,
    options: HfChatTemplateOptions = {},
  ) {
    const source = options.template ?? tokenizer.config.chat_template;
    if (source == null || source.length === 0) {
      throw new InvalidArgumentError(
        "chat_template",
        "the checkpoint has no chat template; pass one as `template`",
      );
    }
    this.source = source;
    this.extraContext = options.extraContext ?? {};
  }

  /** The template of a checkpoint folder: `chat_template.jinja` when present, else tokenizer_config.json's. */
  static async fromDir(
    dir: string,
    tokenizer: HfTokenizer,
    options: Omit<HfChatTemplateOptions, "template"> = {},
  ): Promise<HfChatTemplate> {
    let template: string | undefined;
    try {
      template = await readFile(join(dir, "chat_template.jinja"), "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") {
        throw new PretrainedCheckpointError(
          "missing_file",
          join(dir, "chat_template.jinja"),
          `cannot read: ${(error as Error).message}`,
        );
      }
    }
    if (template === undefined && tokenizer.config.chat_template == null) {
      throw new PretrainedCheckpointError(
        "missing_file",
        join(dir, "tokenizer_config.json"),
        "no chat template (neither chat_template.jinja nor tokenizer_config.json's chat_template)",
      );
    }
    return new HfChatTemplate(tokenizer, { ...options, template });
  }

  private templateFor(hasTools: boolean): Template {
    let text: string;
    if (typeof this.source === "string") text = this.source;
    else {
      const byName = new Map(this.source.map((t) => [t.name, t.template]));
      const picked = (hasTools ? byName.get("tool_use") : undefined) ?? byName.get("default");
      if (picked === undefined) {
        throw new InvalidArgumentError(
          "chat_template",
          `several named templates and no "default" (have: ${[...byName.keys()].join(", ")})`,
        );
      }
      text = picked;
    }
    let t = this.compiled.get(text);
    if (!t) {
      t = new Template(text);
      this.compiled.set(text, t);
    }
    return t;
  }

  /** Validate and render to the prompt text (what `apply_chat_template(..., tokenize=False)` returns). */
  render(
    messages: readonly ChatMessage[],
    tools?: readonly ToolDefinition[] | null,
    options: EncodeChatOptions = {},
  ): string {
    if (tools) parseOrThrow(z.array(ToolSchema), tools, "tools");
    return this.renderPrepared(
      templateMessages(messages),
      templateTools(tools),
      options.addGenerationPrompt ?? true,
    );
  }

  private renderPrepared(
    messages: TemplateMessage[],
    tools: unknown[] | null,
    addGenerationPrompt: boolean,
  ): string {
    const tok = this.tokenizer;
    const context: Record<string, unknown> = {
      ...tok.specialTokens,
      additional_special_tokens: tok.additionalSpecialTokens,
      ...this.extraContext,
      messages,
      tools,
      documents: null,
      add_generation_prompt: addGenerationPrompt,
    };
    try {
      return this.templateFor(tools !== null && tools.length > 0).render(context);
    } catch (error) {
      if (InvalidArgumentError.isInstance(error)) throw error;
      throw new InvalidArgumentError("messages", `chat template failed: ${(error as Error).message}`);
    }
  }

  encodeChat(
    messages: readonly ChatMessage[],
    tools?: readonly ToolDefinition[] | null,
    options: EncodeChatOptions = {},
  ): EncodedChat {
    if (tools) parseOrThrow(z.array(ToolSchema), tools, "tools");
    const msgs = templateMessages(messages);
    const defs = templateTools(tools);
    const addGen = options.addGenerationPrompt ?? true;
    const text = this.renderPrepared(msgs, defs, addGen);
    // The template writes its own bos; the post-processor would add a second one (apply_chat_template too
    // encodes with add_special_tokens=False).
    const ids = this.tokenizer.encode(text, { addSpecialTokens: false });
    const ends = cumulative(tokenByteLengths(this.tokenizer, ids));
    const total = ends.at(-1) ?? 0;
    const norm = (s: string) => s.normalize("NFC");
    const aligned = total === Buffer.byteLength(norm(text), "utf8");
    /** Index of the first token that starts at or after this byte offset. */
    const tokenAt = (byte: number) => {
      let i = 0;
      while (i < ends.length && (ends[i] as number) <= byte) i++;
      return Math.min(i, ids.length);
    };
    const byteOf = (prefix: string) => Buffer.byteLength(norm(prefix), "utf8");

    const messageOffsets: number[] = [];
    const assistantMask = new Array<number>(ids.length).fill(0);
    const eosIds = new Set(this.tokenizer.eosIds);
    msgs.forEach((m, i) => {
      messageOffsets.push(this.offsetOf(msgs.slice(0, i), defs, text, aligned ? tokenAt : null, byteOf));
      if (m.role !== "assistant") return;
      const prompt = this.renderPrepared(msgs.slice(0, i), defs, true);
      if (!aligned || !text.startsWith(prompt)) {
        throw new InvalidArgumentError(
          `messages.${i}`,
          "cannot locate this assistant turn in the rendered chat (the template re-renders earlier turns or the text does not align with its tokens)",
        );
      }
      const start = tokenAt(byteOf(prompt));
      let end = start;
      while (end < ids.length && !eosIds.has(ids[end] as number)) end++;
      end = Math.min(end + 1, ids.length);
      for (let k = start; k < end; k++) assistantMask[k] = 1;
    });
    return { ids, assistantMask, messageOffsets };
  }

  /** Token index where the chat rendered up to (not including) a message ends; -1 if it is no prefix. */
  private offsetOf(
    before: TemplateMessage[],
    defs: unknown[] | null,
    text: string,
    tokenAt: ((byte: number) => number) | null,
    byteOf: (s: string) => number,
  ): number {
    if (before.length === 0 || tokenAt === null) return before.length === 0 ? 0 : -1;
    let prefix: string;
    try {
      prefix = this.renderPrepared(before, defs, false);
    } catch {
      return -1;
    }
    return text.startsWith(prefix) ? tokenAt(byteOf(prefix)) : -1;
  }

  /** vLLM's `hermes` tool parser (see `parseHermesToolCalls`). */
  parseToolCalls(text: string): ParsedAssistantOutput {
    return parseHermesToolCalls(text);
  }
}

function cumulative(lengths: readonly number[]): number[] {
  let sum = 0;
  return lengths.map((n) => {
    sum += n;
    return sum;
  });
}

interface TemplateMessage {
  role: string;
  content: string;
  name?: string;
  tool_call_id?: string;
  tool_calls?: Array<{ id?: string; type: "function"; function: { name: string; arguments: unknown } }>;
  [key: string]: unknown;
}

function contentOf(content: unknown): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return (content as Array<{ text: string }>).map((p) => p.text).join("\n");
}

/**
 * Validate OpenAI / transformers messages (InvalidArgumentError naming the field) and hand them to the
 * template the way vLLM does: content parts joined with "\n", null content as "", tool-call arguments as
 * an object (a JSON string is parsed, so `tojson` prints JSON and a string renders as the object would),
 * tool calls in the `function` form (an `id` only when given), other message keys passed through.
 */
export function templateMessages(messages: readonly ChatMessage[]): TemplateMessage[] {
  const parsed: ParsedChatMessage[] = parseOrThrow(z.array(ChatMessageSchema), messages, "messages");
  return parsed.map((m) => {
    const { tool_calls: _calls, ...rest } = m as ParsedChatMessage & { tool_calls?: unknown };
    const out: TemplateMessage = { ...rest, content: contentOf(m.content) };
    if (m.role === "assistant" && m.tool_calls && m.tool_calls.length > 0) {
      out.tool_calls = m.tool_calls.map((c) => ({
        ...(c.id !== undefined ? { id: c.id } : {}),
        type: "function" as const,
        function: { name: c.function.name, arguments: parseArguments(c.function.arguments) },
      }));
    }
    return out;
  });
}

function parseArguments(args: string | Record<string, unknown>): unknown {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

function templateTools(tools: readonly ToolDefinition[] | null | undefined): unknown[] | null {
  return tools && tools.length > 0 ? (JSON.parse(JSON.stringify(tools)) as unknown[]) : null;
}
