import type { Attributes, Span } from "@agl/core";

/**
 * Where a `/v1/responses` conversation lives between calls: in the span of the call that answered it.
 * That span already holds the chat messages sent (`gen_ai.prompt.*`) and the answer
 * (`gen_ai.completion.0.*`); the few attributes below say how to read them back as the conversation and
 * output items, so any proxy on the same store (a restarted one, another replica) can continue it. The ids
 * name the span: `resp_<span id>`, `msg_<span id>`, `fc_<span id>_<n>`, so one span lookup by id
 * (`querySpans(rollout, {attemptId, spanId})`, a filter Agent Lightning's stores have) finds them.
 */

/** The response id (present only on a stored, successful Responses call). */
export const RESPONSE_ID = "agl.proxy.responses.id";
/** Index of the first `gen_ai.prompt.*` message of the conversation (1 when instructions came first). */
export const HISTORY_START = "agl.proxy.responses.history_start";
/** Prompt indexes whose content is a part list (recorded as JSON text), e.g. text with images. */
export const MULTIPART = "agl.proxy.responses.multipart";
/** The answer's function calls `[{id, name, arguments}]` as JSON (exact ids and arguments). */
export const TOOL_CALLS = "agl.proxy.responses.tool_calls";
/** The output item ids in order (the message item, when there is one, and the function calls'). */
export const ITEMS = "agl.proxy.responses.items";

export interface ToolCallOut {
  id: string;
  name: string;
  arguments: string;
}

export interface ResponseIds {
  response: string;
  message: string;
  call(index: number): string;
}

export const responseIds = (spanId: string): ResponseIds => ({
  response: `resp_${spanId}`,
  message: `msg_${spanId}`,
  call: (index) => `fc_${spanId}_${index}`,
});

const RESPONSE_ID_RE = /^resp_([0-9a-f]{16})$/;
const ITEM_ID_RE = /^(?:msg_([0-9a-f]{16})|fc_([0-9a-f]{16})_\d{1,4})$/;

/** The span id a response id names, or null when it is not one this proxy hands out. */
export function spanOfResponse(id: string): string | null {
  return RESPONSE_ID_RE.exec(id)?.[1] ?? null;
}

/** The span id an output item id names, or null. */
export function spanOfItem(id: string): string | null {
  const m = ITEM_ID_RE.exec(id);
  return m ? (m[1] ?? m[2] ?? null) : null;
}

/** The assistant message a finished answer adds to the conversation. */
export function assistantMessage(text: string, toolCalls: ToolCallOut[]): Record<string, unknown> {
  const m: Record<string, unknown> = {
    role: "assistant",
    content: text === "" && toolCalls.length ? null : text,
  };
  if (toolCalls.length) {
    m.tool_calls = toolCalls.map((t) => ({
      id: t.id,
      type: "function",
      function: { name: t.name, arguments: t.arguments },
    }));
  }
  return m;
}

export function messageItem(id: string, text: string, status: string, textPart?: unknown) {
  return {
    type: "message",
    id,
    status,
    role: "assistant",
    content: [textPart ?? { type: "output_text", text, annotations: [] }],
  };
}

export function functionCallItem(id: string, t: ToolCallOut, status: string) {
  return { type: "function_call", id, call_id: t.id, name: t.name, arguments: t.arguments, status };
}

/** The span attributes that make a response restorable (`messages` as sent upstream). */
export function stateAttributes(
  ids: ResponseIds,
  messages: unknown[],
  historyStart: number,
  toolCalls: ToolCallOut[],
  itemIds: string[],
): Attributes {
  const a: Attributes = { [RESPONSE_ID]: ids.response, [HISTORY_START]: historyStart, [ITEMS]: itemIds };
  const multipart = messages.flatMap((m, i) => (Array.isArray((m as any)?.content) ? [i] : []));
  if (multipart.length) a[MULTIPART] = multipart;
  if (toolCalls.length) a[TOOL_CALLS] = JSON.stringify(toolCalls);
  return a;
}

export interface RestoredResponse {
  responseId: string;
  /** The conversation up to and including the answer (what `previous_response_id` continues). */
  conversation: unknown[];
  /** Output items by id (what `item_reference` inputs name). */
  items: Array<[string, unknown]>;
}

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** The conversation and output items a span recorded; null when it holds no stored response. */
export function restoreFromSpan(span: Pick<Span, "span_id" | "attributes">): RestoredResponse | null {
  const a = span.attributes as Record<string, unknown>;
  const ids = responseIds(span.span_id);
  if (a[RESPONSE_ID] !== ids.response || a["agl.proxy.status"] !== "ok") return null;
  const start = a[HISTORY_START];
  if (typeof start !== "number" || !Number.isInteger(start) || start < 0) return null;
  const multipart = new Set(Array.isArray(a[MULTIPART]) ? (a[MULTIPART] as unknown[]) : []);
  const conversation: unknown[] = [];
  try {
    for (let i = 0; str(a[`gen_ai.prompt.${i}.role`]) !== undefined; i++) {
      if (i < start) continue;
      const p = `gen_ai.prompt.${i}`;
      const m: Record<string, unknown> = { role: a[`${p}.role`] };
      const toolCallId = str(a[`${p}.tool_call_id`]);
      if (toolCallId !== undefined) m.tool_call_id = toolCallId;
      const content = str(a[`${p}.content`]);
      m.content = content === undefined ? null : multipart.has(i) ? JSON.parse(content) : content;
      const toolCalls = str(a[`${p}.tool_calls`]);
      if (toolCalls !== undefined) m.tool_calls = JSON.parse(toolCalls);
      const name = str(a[`${p}.name`]);
      if (name !== undefined) m.name = name;
      conversation.push(m);
    }
    const text = str(a["gen_ai.completion.0.content"]) ?? "";
    const toolCalls: ToolCallOut[] = a[TOOL_CALLS] ? JSON.parse(String(a[TOOL_CALLS])) : [];
    conversation.push(assistantMessage(text, toolCalls));
    const items: Array<[string, unknown]> = [];
    for (const id of Array.isArray(a[ITEMS]) ? (a[ITEMS] as unknown[]) : []) {
      if (id === ids.message) items.push([id, messageItem(id, text, "completed")]);
      const call = toolCalls.findIndex((_, i) => ids.call(i) === id);
      if (call >= 0)
        items.push([id as string, functionCallItem(id as string, toolCalls[call]!, "completed")]);
    }
    return { responseId: ids.response, conversation, items };
  } catch {
    return null; // not written by this proxy's rules: treated as absent
  }
}
