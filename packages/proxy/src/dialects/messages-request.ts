import { z } from "zod";
import { DialectRequestError, given, parseAt, rejectHostedFields, textOf } from "./dialect.js";

const TextBlock = z.looseObject({ type: z.literal("text"), text: z.string() });
const ImageSource = z.union([
  z.looseObject({ type: z.literal("base64"), media_type: z.string().min(1), data: z.string().min(1) }),
  z.looseObject({ type: z.literal("url"), url: z.string().min(1) }),
]);
const ImageBlock = z.looseObject({ type: z.literal("image"), source: ImageSource });
const ToolUseBlock = z.looseObject({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.unknown(),
});
const ToolResultBlock = z.looseObject({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]).optional(),
  is_error: z.boolean().optional(),
});
const Block = z.looseObject({ type: z.string() });

/** The fields of a `POST /v1/messages` body the proxy reads (Anthropic Messages API). */
export const MessagesRequestSchema = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.number().int().positive(),
  messages: z.array(
    z.looseObject({
      role: z.enum(["user", "assistant"]),
      content: z.union([z.string(), z.array(Block)]),
    }),
  ),
  system: z.union([z.string(), z.array(TextBlock)]).nullish(),
  stop_sequences: z.array(z.string()).nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  stream: z.boolean().nullish(),
  tools: z.array(z.looseObject({ name: z.string().min(1), type: z.string().nullish() })).nullish(),
  tool_choice: z
    .looseObject({
      type: z.enum(["auto", "any", "tool", "none"]),
      name: z.string().optional(),
      disable_parallel_tool_use: z.boolean().optional(),
    })
    .nullish(),
});
export type MessagesRequest = z.output<typeof MessagesRequestSchema>;

export function parseMessagesRequest(body: unknown): MessagesRequest {
  const request = parseAt(MessagesRequestSchema, body, "");
  // remote MCP servers and the code-execution container run on Anthropic's side
  rejectHostedFields(request, { mcp_servers: given, container: given });
  return request;
}

function imagePart(block: z.output<typeof ImageBlock>) {
  const s = block.source as any;
  const url = s.type === "base64" ? `data:${s.media_type};base64,${s.data}` : s.url;
  return { type: "image_url", image_url: { url } };
}

/** User content: text stays a string; images make it a part list. */
function userContent(blocks: Array<Record<string, any>>, path: string): unknown {
  if (blocks.every((b) => b.type === "text")) return textOf(blocks);
  return blocks.map((b, j) =>
    b.type === "text" ? { type: "text", text: b.text } : imagePart(parseAt(ImageBlock, b, `${path}.${j}`)),
  );
}

type ChatMessage = Record<string, any>;

function messageToChat(m: MessagesRequest["messages"][number], i: number, out: ChatMessage[]): void {
  const path = `messages.${i}.content`;
  if (typeof m.content === "string") {
    out.push({ role: m.role, content: m.content });
    return;
  }
  const rest: Array<Record<string, any>> = [];
  const toolCalls: unknown[] = [];
  m.content.forEach((b, j) => {
    const where = `${path}.${j}`;
    switch (b.type) {
      case "text":
        rest.push(parseAt(TextBlock, b, where));
        break;
      case "image":
        if (m.role !== "user") throw new DialectRequestError(where, `${where}: images only in user messages`);
        rest.push(b);
        break;
      case "tool_use": {
        if (m.role !== "assistant")
          throw new DialectRequestError(where, `${where}: tool_use blocks belong to assistant messages`);
        const t = parseAt(ToolUseBlock, b, where);
        toolCalls.push({
          id: t.id,
          type: "function",
          function: { name: t.name, arguments: JSON.stringify(t.input ?? {}) },
        });
        break;
      }
      case "tool_result": {
        if (m.role !== "user")
          throw new DialectRequestError(where, `${where}: tool_result blocks belong to user messages`);
        const r = parseAt(ToolResultBlock, b, where);
        const text = r.content === undefined ? "" : textOf(r.content);
        // tool results answer the previous assistant turn, so they go before the user's own text
        out.push({
          role: "tool",
          tool_call_id: r.tool_use_id,
          content: r.is_error ? `Error: ${text}` : text,
        });
        break;
      }
      case "thinking":
      case "redacted_thinking":
        // the open model's chat template re-derives its reasoning
        break;
      default:
        throw new DialectRequestError(`${where}.type`, `${where}.type: "${b.type}" blocks are not supported`);
    }
  });
  if (m.role === "assistant") {
    const content = rest.length ? textOf(rest) : null;
    if (content !== null || toolCalls.length) {
      out.push({ role: "assistant", content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) });
    }
  } else if (rest.length) {
    out.push({ role: "user", content: userContent(rest, path) });
  }
}

function toolsToChat(tools: NonNullable<MessagesRequest["tools"]>): unknown[] {
  return tools.map((t, i) => {
    if (t.type && t.type !== "custom") {
      throw new DialectRequestError(
        `tools.${i}.type`,
        `tools.${i}.type: only custom (client) tools can be served ("${t.type}" is a server tool)`,
      );
    }
    const schema = (t as any).input_schema;
    if (schema === undefined || schema === null || typeof schema !== "object")
      throw new DialectRequestError(`tools.${i}.input_schema`, `tools.${i}.input_schema: required object`);
    return {
      type: "function",
      function: {
        name: t.name,
        ...(typeof (t as any).description === "string" ? { description: (t as any).description } : {}),
        parameters: schema,
      },
    };
  });
}

function toolChoiceToChat(c: NonNullable<MessagesRequest["tool_choice"]>): unknown {
  if (c.type === "auto") return "auto";
  if (c.type === "any") return "required";
  if (c.type === "none") return "none";
  if (!c.name) throw new DialectRequestError("tool_choice.name", "tool_choice.name: required for type tool");
  return { type: "function", function: { name: c.name } };
}

/** An Anthropic Messages request as the chat/completions request an open model serves. */
export function messagesToChat(r: MessagesRequest): Record<string, any> {
  const messages: ChatMessage[] = [];
  const system = r.system ? textOf(r.system) : "";
  if (system) messages.push({ role: "system", content: system });
  for (const [i, m] of r.messages.entries()) messageToChat(m, i, messages);
  const chat: Record<string, any> = { model: r.model, messages, max_tokens: r.max_tokens };
  if (r.stop_sequences?.length) chat.stop = r.stop_sequences;
  if (typeof r.temperature === "number") chat.temperature = r.temperature;
  if (typeof r.top_p === "number") chat.top_p = r.top_p;
  if (typeof r.top_k === "number") chat.top_k = r.top_k;
  if (r.tools?.length) chat.tools = toolsToChat(r.tools);
  if (r.tool_choice) {
    chat.tool_choice = toolChoiceToChat(r.tool_choice);
    if (r.tool_choice.disable_parallel_tool_use === true && chat.tools) chat.parallel_tool_calls = false;
  }
  if (r.stream) chat.stream = true;
  return chat;
}
