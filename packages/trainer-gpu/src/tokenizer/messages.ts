import { z } from "zod";

/** OpenAI chat message and tool shapes (the subset a text-only policy can render), validated at the edge. */

const TextPart = z.object({ type: z.literal("text"), text: z.string() });
const Content = z.union([z.string(), z.array(TextPart)]);

/** A tool call as the OpenAI API returns it (what the parsers produce). */
export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

const Arguments = z.union([z.string(), z.record(z.string(), z.unknown())]);

/**
 * A tool call in a conversation, in every form `apply_chat_template` accepts: OpenAI's
 * (`{id, type, function: {name, arguments}}`, `arguments` a JSON string), `arguments` as an object (the form
 * transformers' docs and Qwen/Llama templates use), without `id` or `type`, or the flat `{name, arguments}`
 * (normalised to the `function` form, which templates that accept both render the same).
 */
export const MessageToolCallSchema = z
  .union([
    z.object({
      id: z.string().optional(),
      type: z.literal("function").optional(),
      function: z.object({ name: z.string().min(1), arguments: Arguments.optional() }),
    }),
    z.object({ id: z.string().optional(), name: z.string().min(1), arguments: Arguments.optional() }),
  ])
  .transform((c) => {
    const fn = "function" in c ? c.function : { name: c.name, arguments: c.arguments };
    return {
      ...(c.id !== undefined ? { id: c.id } : {}),
      type: "function" as const,
      function: { name: fn.name, arguments: fn.arguments ?? {} },
    };
  });
export type MessageToolCall = z.output<typeof MessageToolCallSchema>;

const MESSAGE_SHAPES = [
  { role: z.literal("system"), content: Content, name: z.string().optional() },
  { role: z.literal("developer"), content: Content, name: z.string().optional() },
  { role: z.literal("user"), content: Content, name: z.string().optional() },
  {
    role: z.literal("assistant"),
    content: Content.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(MessageToolCallSchema).nullish(),
  },
  {
    role: z.literal("tool"),
    content: Content,
    tool_call_id: z.string().optional(),
    name: z.string().optional(),
  },
] as const;

/**
 * Messages keep keys they do not name (e.g. Qwen3's `reasoning_content`): templates read them, as
 * apply_chat_template hands each message dict to the template as is. (`ChatMessage`, the TypeScript type,
 * lists the named keys only, so OpenAI SDK message types stay assignable to it.)
 */
export const ChatMessageSchema = z.discriminatedUnion("role", [
  z.looseObject(MESSAGE_SHAPES[0]),
  z.looseObject(MESSAGE_SHAPES[1]),
  z.looseObject(MESSAGE_SHAPES[2]),
  z.looseObject(MESSAGE_SHAPES[3]),
  z.looseObject(MESSAGE_SHAPES[4]),
]);
const TypedChatMessageSchema = z.discriminatedUnion("role", [
  z.object(MESSAGE_SHAPES[0]),
  z.object(MESSAGE_SHAPES[1]),
  z.object(MESSAGE_SHAPES[2]),
  z.object(MESSAGE_SHAPES[3]),
  z.object(MESSAGE_SHAPES[4]),
]);
export type ChatMessage = z.input<typeof TypedChatMessageSchema>;
export type ParsedChatMessage = z.output<typeof ChatMessageSchema>;

/** Tool-call arguments as a JSON string (an object argument is serialised). */
export function argumentsText(args: string | Record<string, unknown>): string {
  return typeof args === "string" ? args : JSON.stringify(args);
}

export const ToolSchema = z.object({
  type: z.literal("function").default("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
});
export type ToolDefinition = z.input<typeof ToolSchema>;

export function contentText(content: z.infer<typeof Content> | null | undefined): string {
  if (content == null) return "";
  if (typeof content === "string") return content;
  return content.map((p) => p.text).join("");
}
