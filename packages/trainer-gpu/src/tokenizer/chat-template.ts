import { parseOrThrow } from "@agl/core";
import { z } from "zod";
import {
  argumentsText,
  type ChatMessage,
  ChatMessageSchema,
  contentText,
  type ToolDefinition,
  ToolSchema,
} from "./messages.js";
import type { ChatEncoder, EncodeChatOptions, EncodedChat } from "./text-tokenizer.js";
import type { Tokenizer } from "./tokenizer.js";
import { type ParsedAssistantOutput, parseToolCalls, renderToolCallBody } from "./tool-calls.js";

/**
 * The chat template. Every message renders to its own token segment, independent of later messages:
 *
 *   <bos> [<|system|> text <eos>] [<|tools|> tool lines <eos>]
 *   <|user|> text <eos>   <|assistant|> text <tool_call>{...}</tool_call> <eos>   <|tool|> result <eos> ...
 *   <|assistant|>                      (generation prompt)
 *
 * Segments are concatenated as ids (never re-tokenized together), so the ids of earlier turns never change
 * when a turn is appended: the prompt of turn k is an exact prefix of the prompt of turn k+1, provided the
 * assistant reply re-renders to what the model generated (it does for text and canonical tool calls).
 */

export type ToolStyle = "signature" | "json";

export interface ChatTemplateOptions {
  /**
   * How tool definitions are rendered: "signature" = one `name(arg1,arg2)` line per tool (short, for tiny
   * contexts); "json" = one compact JSON line per tool with description and parameters.
   */
  toolStyle?: ToolStyle;
}

const ROLE_TOKEN = {
  system: "<|system|>",
  developer: "<|system|>",
  user: "<|user|>",
  assistant: "<|assistant|>",
  tool: "<|tool|>",
} as const;

export class ChatTemplate implements ChatEncoder {
  readonly toolStyle: ToolStyle;

  constructor(
    readonly tokenizer: Tokenizer,
    options: ChatTemplateOptions = {},
  ) {
    this.toolStyle = options.toolStyle ?? "signature";
  }

  renderTool(tool: z.output<typeof ToolSchema>): string {
    const fn = tool.function;
    if (this.toolStyle === "json") {
      return JSON.stringify({ name: fn.name, description: fn.description, parameters: fn.parameters });
    }
    const props = (fn.parameters as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
    return `${fn.name}(${Object.keys(props).join(",")})`;
  }

  /** Strict parse of canonical `<tool_call>` blocks (see `parseToolCalls`). */
  parseToolCalls(text: string): ParsedAssistantOutput {
    return parseToolCalls(text);
  }

  /** Validate messages/tools (InvalidArgumentError naming the field) and render to ids with the assistant mask. */
  encodeChat(
    messages: readonly ChatMessage[],
    tools?: readonly ToolDefinition[] | null,
    options: EncodeChatOptions = {},
  ): EncodedChat {
    const msgs = parseOrThrow(z.array(ChatMessageSchema), messages, "messages");
    const defs = tools ? parseOrThrow(z.array(ToolSchema), tools, "tools") : [];
    const tok = this.tokenizer;
    const ids: number[] = [tok.bosId];
    const mask: number[] = [0];
    const offsets: number[] = [];
    const push = (segment: number[], assistant: boolean) => {
      for (const id of segment) {
        ids.push(id);
        mask.push(assistant ? 1 : 0);
      }
    };
    const toolsBlock = () => {
      if (defs.length === 0) return;
      const lines = defs.map((t) => this.renderTool(t)).join("\n");
      push([tok.special("<|tools|>"), ...tok.encode(lines), tok.eosId], false);
    };
    let toolsDone = false;
    msgs.forEach((m, i) => {
      const isLeadingSystem = i === 0 && (m.role === "system" || m.role === "developer");
      if (!toolsDone && !isLeadingSystem) {
        toolsBlock();
        toolsDone = true;
      }
      offsets.push(ids.length);
      push([tok.special(ROLE_TOKEN[m.role])], false);
      if (m.role === "assistant") {
        const body: number[] = tok.encode(contentText(m.content));
        for (const call of m.tool_calls ?? []) {
          body.push(tok.special("<tool_call>"));
          body.push(
            ...tok.encode(renderToolCallBody(call.function.name, argumentsText(call.function.arguments))),
          );
          body.push(tok.special("</tool_call>"));
        }
        body.push(tok.eosId);
        push(body, true);
      } else {
        push([...tok.encode(contentText(m.content)), tok.eosId], false);
      }
      if (isLeadingSystem) {
        toolsBlock();
        toolsDone = true;
      }
    });
    if (!toolsDone) toolsBlock();
    if (options.addGenerationPrompt ?? true) push([tok.special("<|assistant|>")], false);
    return { ids, assistantMask: mask, messageOffsets: offsets };
  }
}
