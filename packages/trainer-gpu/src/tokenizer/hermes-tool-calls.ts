import { parse } from "lossless-json";
import type { ToolCall } from "./messages.js";
import { pythonJsonDumpsValue } from "./python-json.js";
import { newCallId, type ParsedAssistantOutput, TOOL_CALL_CLOSE, TOOL_CALL_OPEN } from "./tool-calls.js";

/**
 * Tool calls in the output of a Hugging Face checkpoint (Qwen, Hermes), parsed the way vLLM's `hermes`
 * tool parser does: every `<tool_call>…</tool_call>` block, plus a last block left open at the end of
 * the output (generation stopped on eos before the closing tag), holds JSON `{"name", "arguments"}`.
 * Content is the text before the first block (null when empty); text between or after blocks is dropped.
 * Arguments are re-serialised as Python's `json.dumps(..., ensure_ascii=False)` writes them. If any block
 * fails (invalid JSON, not an object, no non-empty string name, no arguments) nothing is parsed and the whole output
 * is the content — never an exception.
 */
export function parseHermesToolCalls(text: string, makeId: () => string = newCallId): ParsedAssistantOutput {
  const first = text.indexOf(TOOL_CALL_OPEN);
  if (first < 0) return { content: text, toolCalls: [] };
  const plain = { content: text, toolCalls: [] };
  const calls: ToolCall[] = [];
  let pos = first;
  while (pos >= 0 && pos < text.length) {
    const bodyStart = pos + TOOL_CALL_OPEN.length;
    const close = text.indexOf(TOOL_CALL_CLOSE, bodyStart);
    const body = close < 0 ? text.slice(bodyStart) : text.slice(bodyStart, close);
    const call = toolCallOf(body, makeId);
    if (call === null) return plain;
    calls.push(call);
    if (close < 0) break;
    pos = text.indexOf(TOOL_CALL_OPEN, close + TOOL_CALL_CLOSE.length);
  }
  const content = text.slice(0, first);
  return { content: content.length > 0 ? content : null, toolCalls: calls };
}

function toolCallOf(body: string, makeId: () => string): ToolCall | null {
  let parsed: unknown;
  try {
    parsed = parse(body);
  } catch {
    return null;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null;
  const record = parsed as Record<string, unknown>;
  if (typeof record.name !== "string" || record.name.length === 0 || !("arguments" in record)) return null;
  return {
    id: makeId(),
    type: "function",
    function: { name: record.name, arguments: pythonJsonDumpsValue(record.arguments) },
  };
}
