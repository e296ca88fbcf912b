import { z } from "zod";

/** OpenAI chat message and tool shapes (the subset a text-only policy can render), validated at the edge. */

const TextPart = z.object({ type: z.literal("text"), text: z.string() });
const Content = z.union([z.string(), z.array(TextPart)]);

export const ToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.object({ name: z.string().min(1), arguments: z.string() }),
});
export type ToolCall = z.infer<typeof ToolCallSchema>;

export const ChatMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content: Content, name: z.string().optional() }),
  z.object({ role: z.literal("developer"), content: Content, name: z.string().optional() }),
  z.object({ role: z.literal("user"), content: Content, name: z.string().optional() }),
  z.object({
    role: z.literal("assistant"),
    content: Content.nullish(),
    name: z.string().optional(),
    tool_calls: z.array(ToolCallSchema).nullish(),
  }),
  z.object({ role: z.literal("tool"), content: Content, tool_call_id: z.string().optional() }),
]);
export type ChatMessage = z.input<typeof ChatMessageSchema>;

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
