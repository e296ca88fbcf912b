import type { ServerResponse } from "node:http";
import { mockEncode } from "./tokens.js";

/**
 * The mock's `/v1/responses` and `/v1/messages`, as vLLM serves them for open models: the request is
 * rendered to chat messages (what the chat template sees), the reply comes from the same `respond`
 * policy, and the answer is in the OpenAI Responses or Anthropic Messages wire format, streamed as their
 * event streams when asked. Like vLLM's, these answers carry no token ids (the proxy serves these APIs
 * over chat/completions to get them).
 */

export interface ChatView {
  model: unknown;
  messages: Array<Record<string, unknown>>;
  tools?: unknown[];
  stream: boolean;
}

export interface ReplyLike {
  content?: string | null;
  tool_calls?: Array<{ id?: string; name: string; arguments: string }>;
  finish_reason?: string;
}

export class MockRequestError extends Error {}

const text = (c: unknown): string =>
  typeof c === "string"
    ? c
    : Array.isArray(c)
      ? c.map((p: any) => (typeof p?.text === "string" ? p.text : "")).join("")
      : "";

/** A Responses request as chat messages; throws MockRequestError on what the real API rejects. */
export function responsesToChatView(body: any, stored: Map<string, unknown> = new Map()): ChatView {
  if (typeof body?.model !== "string") throw new MockRequestError("model: required string");
  const input = body.input;
  if (typeof input !== "string" && !Array.isArray(input))
    throw new MockRequestError("input: string or array");
  const messages: Array<Record<string, unknown>> = [];
  if (typeof body.instructions === "string") messages.push({ role: "system", content: body.instructions });
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else {
    for (const given of input) {
      // items of earlier responses (kept unless `store: false`) may be sent by reference
      const item: any = given?.type === "item_reference" ? stored.get(given.id) : given;
      if (item === undefined) throw new MockRequestError(`item_reference ${given.id}: no such stored item`);
      const type = item?.type ?? "message";
      if (type === "message")
        messages.push({
          role: item.role === "developer" ? "system" : item.role,
          content: text(item.content),
        });
      else if (type === "function_call") {
        const call = {
          id: item.call_id,
          type: "function",
          function: { name: item.name, arguments: item.arguments },
        };
        const last = messages.at(-1);
        if (last?.role === "assistant") ((last.tool_calls ??= []) as unknown[]).push(call);
        else messages.push({ role: "assistant", content: null, tool_calls: [call] });
      } else if (type === "function_call_output")
        messages.push({ role: "tool", tool_call_id: item.call_id, content: text(item.output) });
      else if (type !== "reasoning") throw new MockRequestError(`input item type ${type} is not supported`);
    }
  }
  const tools = Array.isArray(body.tools)
    ? body.tools.map((t: any) => ({
        type: "function",
        function: { name: t.name, description: t.description, parameters: t.parameters },
      }))
    : undefined;
  return { model: body.model, messages, tools, stream: body.stream === true };
}

/** An Anthropic Messages request as chat messages. */
export function messagesToChatView(body: any): ChatView {
  if (typeof body?.model !== "string") throw new MockRequestError("model: required string");
  if (!Number.isInteger(body.max_tokens)) throw new MockRequestError("max_tokens: required integer");
  if (!Array.isArray(body.messages)) throw new MockRequestError("messages: required array");
  const messages: Array<Record<string, unknown>> = [];
  if (body.system) messages.push({ role: "system", content: text(body.system) });
  for (const m of body.messages) {
    if (typeof m.content === "string") {
      messages.push({ role: m.role, content: m.content });
      continue;
    }
    const calls = m.content
      .filter((b: any) => b.type === "tool_use")
      .map((b: any) => ({
        id: b.id,
        type: "function",
        function: { name: b.name, arguments: JSON.stringify(b.input) },
      }));
    for (const b of m.content.filter((b: any) => b.type === "tool_result"))
      messages.push({ role: "tool", tool_call_id: b.tool_use_id, content: text(b.content) });
    const words = text(m.content.filter((b: any) => b.type === "text"));
    if (words || calls.length)
      messages.push({ role: m.role, content: words || null, ...(calls.length ? { tool_calls: calls } : {}) });
  }
  const tools = Array.isArray(body.tools)
    ? body.tools.map((t: any) => ({
        type: "function",
        function: { name: t.name, description: t.description, parameters: t.input_schema },
      }))
    : undefined;
  return { model: body.model, messages, tools, stream: body.stream === true };
}

const sse = (res: ServerResponse, type: string, data: Record<string, unknown>) =>
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);

function startSse(res: ServerResponse) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
}

const pieces = (s: string) => s.match(/.{1,4}/gs) ?? [];

/** Answer a Responses request (non-streamed JSON or its event stream). */
export function sendResponsesReply(
  res: ServerResponse,
  id: string,
  view: ChatView,
  reply: ReplyLike,
  body: any,
  stored: Map<string, unknown>,
) {
  const promptTokens = mockEncode(JSON.stringify(view.messages)).length;
  const content = reply.content ?? "";
  const calls = reply.tool_calls ?? [];
  const outputTokens = mockEncode(content + calls.map((c) => c.arguments).join("")).length;
  const message = {
    type: "message",
    id: `msg_${id}`,
    status: "completed",
    role: "assistant",
    content: [{ type: "output_text", text: content, annotations: [] }],
  };
  const fcs = calls.map((c, j) => ({
    type: "function_call",
    id: `fc_${id}_${j}`,
    call_id: c.id ?? `call_${id}_${j}`,
    name: c.name,
    arguments: c.arguments,
    status: "completed",
  }));
  const output = [...(content || !calls.length ? [message] : []), ...fcs];
  if (body.store !== false) for (const item of output) stored.set(item.id, item);
  const response = (status: string, out: unknown[]) => ({
    id: `resp_${id}`,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status,
    model: view.model,
    output: out,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    tools: body.tools ?? [],
    previous_response_id: body.previous_response_id ?? null,
    usage:
      status === "completed"
        ? {
            input_tokens: promptTokens,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: outputTokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: promptTokens + outputTokens,
          }
        : null,
  });
  if (!view.stream) {
    const text = JSON.stringify(response("completed", output));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  startSse(res);
  let seq = 0;
  const emit = (type: string, data: Record<string, unknown>) =>
    sse(res, type, { sequence_number: seq++, ...data });
  emit("response.created", { response: response("in_progress", []) });
  output.forEach((item: any, i) => {
    if (item.type === "message") {
      emit("response.output_item.added", {
        output_index: i,
        item: { ...item, status: "in_progress", content: [] },
      });
      emit("response.content_part.added", {
        item_id: item.id,
        output_index: i,
        content_index: 0,
        part: { type: "output_text", text: "", annotations: [] },
      });
      for (const delta of pieces(content))
        emit("response.output_text.delta", {
          item_id: item.id,
          output_index: i,
          content_index: 0,
          delta,
          logprobs: [],
        });
      emit("response.output_text.done", {
        item_id: item.id,
        output_index: i,
        content_index: 0,
        text: content,
        logprobs: [],
      });
      emit("response.content_part.done", {
        item_id: item.id,
        output_index: i,
        content_index: 0,
        part: item.content[0],
      });
    } else {
      emit("response.output_item.added", {
        output_index: i,
        item: { ...item, arguments: "", status: "in_progress" },
      });
      for (const delta of pieces(item.arguments))
        emit("response.function_call_arguments.delta", { item_id: item.id, output_index: i, delta });
      emit("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: i,
        name: item.name,
        arguments: item.arguments,
      });
    }
    emit("response.output_item.done", { output_index: i, item });
  });
  emit("response.completed", { response: response("completed", output) });
  res.end();
}

/** Answer an Anthropic Messages request (non-streamed JSON or its event stream). */
export function sendMessagesReply(res: ServerResponse, id: string, view: ChatView, reply: ReplyLike) {
  const inputTokens = mockEncode(JSON.stringify(view.messages)).length;
  const content = reply.content ?? "";
  const calls = reply.tool_calls ?? [];
  const blocks: Array<Record<string, any>> = [
    ...(content ? [{ type: "text", text: content }] : []),
    ...calls.map((c, j) => ({
      type: "tool_use",
      id: c.id ?? `toolu_${id}_${j}`,
      name: c.name,
      input: JSON.parse(c.arguments || "{}"),
    })),
  ];
  const stopReason = calls.length ? "tool_use" : reply.finish_reason === "length" ? "max_tokens" : "end_turn";
  const outputTokens = mockEncode(content + calls.map((c) => c.arguments).join("")).length;
  const usage = {
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
  };
  if (!view.stream) {
    const text = JSON.stringify({
      id: `msg_${id}`,
      type: "message",
      role: "assistant",
      model: view.model,
      content: blocks,
      stop_reason: stopReason,
      stop_sequence: null,
      usage,
    });
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  startSse(res);
  sse(res, "message_start", {
    message: {
      id: `msg_${id}`,
      type: "message",
      role: "assistant",
      model: view.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { ...usage, output_tokens: 0 },
    },
  });
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      sse(res, "content_block_start", { index, content_block: { type: "text", text: "" } });
      for (const t of pieces(b.text))
        sse(res, "content_block_delta", { index, delta: { type: "text_delta", text: t } });
    } else {
      sse(res, "content_block_start", { index, content_block: { ...b, input: {} } });
      for (const p of pieces(JSON.stringify(b.input)))
        sse(res, "content_block_delta", { index, delta: { type: "input_json_delta", partial_json: p } });
    }
    sse(res, "content_block_stop", { index });
  });
  sse(res, "message_delta", {
    delta: { stop_reason: stopReason, stop_sequence: null },
    usage: { output_tokens: outputTokens },
  });
  sse(res, "message_stop", {});
  res.end();
}
