import { randomBytes } from "node:crypto";
import type { ToolCall } from "./messages.js";

/**
 * Tool calls in raw model output: `<tool_call>{"name":"f","arguments":{...}}</tool_call>`, the Hermes /
 * Qwen convention. The renderer and the parser agree on compact JSON, so a call the model wrote in the
 * canonical form re-renders to exactly the same characters (no retokenization drift through the parse).
 */

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";

/** Canonical body of one call; `arguments` is embedded as JSON when it parses, else as a JSON string. */
export function renderToolCallBody(name: string, args: string): string {
  let argsJson: string;
  try {
    argsJson = JSON.stringify(JSON.parse(args));
  } catch {
    argsJson = JSON.stringify(args);
  }
  return `{"name":${JSON.stringify(name)},"arguments":${argsJson}}`;
}

export interface ParsedAssistantOutput {
  /** Text outside tool-call blocks (null when there is none and calls were found). */
  content: string | null;
  toolCalls: ToolCall[];
}

export function newCallId(): string {
  return `call_${randomBytes(9).toString("base64url")}`;
}

/**
 * Split generated text into content and OpenAI `tool_calls`. Never throws: if any block is unclosed,
 * not JSON, or lacks a string `name`, the whole text is returned as plain content, so the agent sees
 * what the model actually produced (and training is not hidden from malformed calls).
 */
export function parseToolCalls(text: string, makeId: () => string = newCallId): ParsedAssistantOutput {
  if (!text.includes(TOOL_CALL_OPEN)) return { content: text, toolCalls: [] };
  const calls: ToolCall[] = [];
  let rest = "";
  let pos = 0;
  while (pos < text.length) {
    const open = text.indexOf(TOOL_CALL_OPEN, pos);
    if (open < 0) {
      rest += text.slice(pos);
      break;
    }
    rest += text.slice(pos, open);
    const close = text.indexOf(TOOL_CALL_CLOSE, open + TOOL_CALL_OPEN.length);
    if (close < 0) return { content: text, toolCalls: [] };
    const body = text.slice(open + TOOL_CALL_OPEN.length, close);
    let parsed: unknown;
    try {
      parsed = JSON.parse(body);
    } catch {
      return { content: text, toolCalls: [] };
    }
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
      return { content: text, toolCalls: [] };
    const { name, arguments: args } = parsed as { name?: unknown; arguments?: unknown };
    if (typeof name !== "string" || name.length === 0) return { content: text, toolCalls: [] };
    const argString = args === undefined ? "{}" : typeof args === "string" ? args : JSON.stringify(args);
    calls.push({ id: makeId(), type: "function", function: { name, arguments: argString } });
    pos = close + TOOL_CALL_CLOSE.length;
  }
  return { content: rest.length > 0 ? rest : null, toolCalls: calls };
}
