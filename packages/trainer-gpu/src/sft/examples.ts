import { InvalidArgumentError } from "@agl/core";
import type { ChatMessage, ToolDefinition } from "../tokenizer/messages.js";
import type { ChatEncoder, EncodedChat } from "../tokenizer/text-tokenizer.js";

/**
 * Turning transcripts as they come out of the adapter (`TraceToMessages`: `role: string`, `content` null
 * on any role, non-text content parts, tool-call ids null) into what the chat template accepts. SFT data
 * is harvested from real traces, so one odd span must not sink a whole run: what can be converted is
 * converted, and what cannot is skipped with a reason the caller sees.
 */

/** A loosely typed transcript: the adapter's `MessagesExample`, a JSONL line, or an `SftExample`. */
export interface RawSftExample {
  messages: readonly unknown[];
  tools?: readonly unknown[] | null;
}

export type PreparedExample =
  | { ok: true; messages: ChatMessage[]; tools: ToolDefinition[] }
  | { ok: false; reason: string };

const ROLES: Record<string, ChatMessage["role"]> = {
  system: "system",
  developer: "system",
  user: "user",
  assistant: "assistant",
  tool: "tool",
  // Legacy OpenAI function results and Gemini's name for the assistant.
  function: "tool",
  model: "assistant",
};

/** Content-part types whose `text` is plain text (OpenAI chat and Responses spellings). */
const TEXT_PARTS = new Set(["text", "input_text", "output_text"]);

type Convert<T> = { ok: true; value: T } | { ok: false; reason: string };

const isRecord = (x: unknown): x is Record<string, unknown> =>
  typeof x === "object" && x !== null && !Array.isArray(x);

/** null/undefined -> "", strings as is, text parts joined; only non-text parts is unusable. */
function textOf(content: unknown, where: string): Convert<string> {
  if (content == null) return { ok: true, value: "" };
  if (typeof content === "string") return { ok: true, value: content };
  if (!Array.isArray(content)) return { ok: false, reason: `${where}.content is neither text nor parts` };
  const texts: string[] = [];
  const other = new Set<string>();
  for (const part of content) {
    if (typeof part === "string") texts.push(part);
    else if (isRecord(part) && TEXT_PARTS.has(String(part.type)) && typeof part.text === "string")
      texts.push(part.text);
    else other.add(isRecord(part) ? String(part.type ?? "untyped") : typeof part);
  }
  // A message made only of images etc. would train the reply on context the model never saw.
  if (texts.length === 0 && other.size > 0)
    return { ok: false, reason: `${where} has only non-text content (${[...other].sort().join(", ")})` };
  return { ok: true, value: texts.join("") };
}

function argumentsOf(args: unknown): string {
  if (args == null) return "{}";
  return typeof args === "string" ? args : JSON.stringify(args);
}

function convertMessage(raw: unknown, where: string, newId: () => string): Convert<ChatMessage> {
  if (!isRecord(raw)) return { ok: false, reason: `${where} is not an object` };
  const roleName = typeof raw.role === "string" ? raw.role.trim().toLowerCase() : "";
  const role = ROLES[roleName];
  if (!role) return { ok: false, reason: `${where} has unsupported role "${String(raw.role)}"` };
  const text = textOf(raw.content, where);
  if (!text.ok) return text;
  const name = typeof raw.name === "string" && raw.name !== "" ? { name: raw.name } : {};
  if (role === "assistant") {
    const calls = raw.tool_calls == null ? [] : raw.tool_calls;
    if (!Array.isArray(calls)) return { ok: false, reason: `${where}.tool_calls is not a list` };
    const toolCalls: NonNullable<Extract<ChatMessage, { role: "assistant" }>["tool_calls"]> = [];
    for (const [j, c] of calls.entries()) {
      const fn = isRecord(c) && isRecord(c.function) ? c.function : undefined;
      if (!fn || typeof fn.name !== "string" || fn.name === "")
        return { ok: false, reason: `${where}.tool_calls[${j}] has no function name` };
      const id = isRecord(c) && typeof c.id === "string" && c.id !== "" ? c.id : newId();
      toolCalls.push({
        id,
        type: "function",
        function: { name: fn.name, arguments: argumentsOf(fn.arguments) },
      });
    }
    const msg: ChatMessage = { role, content: text.value, ...name };
    if (toolCalls.length > 0) msg.tool_calls = toolCalls;
    return { ok: true, value: msg };
  }
  if (role === "tool") {
    const id = typeof raw.tool_call_id === "string" ? { tool_call_id: raw.tool_call_id } : {};
    return { ok: true, value: { role, content: text.value, ...id } };
  }
  return { ok: true, value: { role, content: text.value, ...name } };
}

function convertTool(raw: unknown, where: string): Convert<ToolDefinition> {
  const fn = isRecord(raw) ? (isRecord(raw.function) ? raw.function : raw) : undefined;
  if (!fn || typeof fn.name !== "string" || fn.name === "")
    return { ok: false, reason: `${where} has no function name` };
  let parameters = fn.parameters;
  if (typeof parameters === "string") {
    try {
      parameters = JSON.parse(parameters);
    } catch {
      return { ok: false, reason: `${where}.parameters is not JSON` };
    }
  }
  if (parameters != null && !isRecord(parameters))
    return { ok: false, reason: `${where}.parameters is not an object` };
  const def: ToolDefinition = { type: "function", function: { name: fn.name } };
  if (typeof fn.description === "string") def.function.description = fn.description;
  if (parameters != null) def.function.parameters = parameters;
  return { ok: true, value: def };
}

/** Convert one transcript; `index` makes generated tool-call ids unique across the data set. */
export function prepareExample(raw: unknown, index: number): PreparedExample {
  if (!isRecord(raw) || !Array.isArray(raw.messages))
    return { ok: false, reason: "not an object with a messages list" };
  let n = 0;
  const newId = () => `call_${index}_${n++}`;
  const messages: ChatMessage[] = [];
  for (const [i, m] of raw.messages.entries()) {
    const r = convertMessage(m, `messages[${i}]`, newId);
    if (!r.ok) return r;
    messages.push(r.value);
  }
  if (!messages.some((m) => m.role === "assistant")) return { ok: false, reason: "no assistant message" };
  const tools: ToolDefinition[] = [];
  const rawTools = raw.tools == null ? [] : raw.tools;
  if (!Array.isArray(rawTools)) return { ok: false, reason: "tools is not a list" };
  for (const [i, t] of rawTools.entries()) {
    const r = convertTool(t, `tools[${i}]`);
    if (!r.ok) return r;
    tools.push(r.value);
  }
  return { ok: true, messages, tools };
}

/** Prepare and render one transcript; a template rejection becomes a skip reason instead of a throw. */
export function encodeExample(
  template: ChatEncoder,
  raw: unknown,
  index: number,
): { ok: true; encoded: EncodedChat } | { ok: false; reason: string } {
  const prepared = prepareExample(raw, index);
  if (!prepared.ok) return prepared;
  try {
    const encoded = template.encodeChat(prepared.messages, prepared.tools, { addGenerationPrompt: false });
    return { ok: true, encoded };
  } catch (error) {
    if (InvalidArgumentError.isInstance(error)) return { ok: false, reason: error.message };
    throw error;
  }
}

/** "3 x reason; 1 x other reason", most frequent first (reasons are grouped verbatim). */
export function summarizeSkips(skips: ReadonlyArray<{ reason: string }>): string {
  const counts = new Map<string, number>();
  for (const s of skips) counts.set(s.reason, (counts.get(s.reason) ?? 0) + 1);
  return [...counts.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([reason, count]) => `${count} x ${reason}`)
    .join("; ");
}
