import { z } from "zod";
import { DialectRequestError, given, parseAt, rejectHostedFields, textOf } from "./dialect.js";
import type { ResponseHistory, ResponseScope } from "./response-history.js";

/** The fields of a `POST /v1/responses` body the proxy reads; everything else is accepted and ignored. */
export const ResponsesRequestSchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(z.unknown())]),
  instructions: z.string().nullish(),
  tools: z.array(z.unknown()).nullish(),
  tool_choice: z.unknown().optional(),
  previous_response_id: z.string().min(1).nullish(),
  store: z.boolean().nullish(),
  stream: z.boolean().nullish(),
  max_output_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).nullish(),
  top_p: z.number().min(0).max(1).nullish(),
  top_logprobs: z.number().int().min(0).max(20).nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  include: z.array(z.string()).nullish(),
  text: z.looseObject({ format: z.looseObject({ type: z.string() }).optional() }).nullish(),
});
export type ResponsesRequest = z.output<typeof ResponsesRequestSchema>;

const TextPart = z.looseObject({ type: z.enum(["input_text", "output_text", "text"]), text: z.string() });
const ImagePart = z.looseObject({ type: z.literal("input_image"), image_url: z.string().min(1) });
const Part = z.union([TextPart, ImagePart]);
const MessageItem = z.looseObject({
  type: z.literal("message").optional(),
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.union([z.string(), z.array(Part)]),
});
const FunctionCallItem = z.looseObject({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  arguments: z.string(),
});
const FunctionCallOutputItem = z.looseObject({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: z.union([z.string(), z.array(z.unknown())]),
});
const FunctionTool = z.looseObject({
  type: z.literal("function"),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});

type ChatMessage = Record<string, any>;

/** The body, validated: a 400 naming the first bad field otherwise. */
export function parseResponsesRequest(body: unknown): ResponsesRequest {
  const request = parseAt(ResponsesRequestSchema, body, "");
  // `conversation` is OpenAI's stored conversation, `prompt` a stored prompt template, `background` a job
  rejectHostedFields(request, { background: given, conversation: given, prompt: given });
  return request;
}

function userContent(content: z.output<typeof MessageItem>["content"]): unknown {
  if (typeof content === "string") return content;
  // plain text stays a string (what chat templates handle best); images make it a part list
  if (content.every((p) => p.type !== "input_image")) return textOf(content);
  return content.map((p) =>
    p.type === "input_image"
      ? { type: "image_url", image_url: { url: (p as { image_url: string }).image_url } }
      : { type: "text", text: (p as { text: string }).text },
  );
}

/**
 * Responses input items → chat messages (function calls join the assistant turn they follow).
 * `item_reference`s resolve to output items this attempt was given earlier (`resolve`).
 */
export function inputToMessages(
  input: ResponsesRequest["input"],
  resolve: (itemId: string) => unknown = () => undefined,
): ChatMessage[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  const messages: ChatMessage[] = [];
  input.forEach((given, i) => {
    const path = `input.${i}`;
    let raw = given;
    if ((given as any)?.type === "item_reference") {
      const id = (given as any).id;
      raw = typeof id === "string" ? resolve(id) : undefined;
      if (raw === undefined) {
        throw new DialectRequestError(
          `${path}.id`,
          `${path}.id: no stored item "${String(id)}" for this rollout attempt (items are kept per attempt, and not with store: false)`,
        );
      }
    }
    const type = (raw as any)?.type;
    if (type === undefined || type === "message") {
      const m = parseAt(MessageItem, raw, path);
      const role = m.role === "developer" ? "system" : m.role;
      if (role === "user") messages.push({ role, content: userContent(m.content) });
      else if (typeof m.content !== "string" && m.content.some((p) => p.type === "input_image"))
        throw new DialectRequestError(`${path}.content`, `${path}.content: images only in user messages`);
      else messages.push({ role, content: textOf(m.content) });
    } else if (type === "function_call") {
      const c = parseAt(FunctionCallItem, raw, path);
      const call = { id: c.call_id, type: "function", function: { name: c.name, arguments: c.arguments } };
      const last = messages[messages.length - 1];
      if (last?.role === "assistant") (last.tool_calls ??= []).push(call);
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (type === "function_call_output") {
      const o = parseAt(FunctionCallOutputItem, raw, path);
      messages.push({ role: "tool", tool_call_id: o.call_id, content: textOf(o.output) });
    } else if (type === "reasoning") {
      // an open model's chat template re-derives its reasoning; the item carries nothing to send
    } else {
      throw new DialectRequestError(
        `${path}.type`,
        `${path}.type: "${String(type)}" items are not supported (use messages, function_call and function_call_output items)`,
      );
    }
  });
  return messages;
}

function toolsToChat(tools: unknown[]): unknown[] {
  return tools.map((t, i) => {
    if ((t as any)?.type !== "function") {
      throw new DialectRequestError(
        `tools.${i}.type`,
        `tools.${i}.type: only function tools can be served ("${String((t as any)?.type)}" is a hosted tool)`,
      );
    }
    const f = parseAt(FunctionTool, t, `tools.${i}`);
    return {
      type: "function",
      function: {
        name: f.name,
        ...(f.description ? { description: f.description } : {}),
        parameters: f.parameters ?? { type: "object", properties: {} },
        ...(typeof f.strict === "boolean" ? { strict: f.strict } : {}),
      },
    };
  });
}

function toolChoiceToChat(choice: unknown): unknown {
  if (choice === "auto" || choice === "none" || choice === "required") return choice;
  const c = choice as any;
  if (c?.type === "function" && typeof c.name === "string")
    return { type: "function", function: { name: c.name } };
  throw new DialectRequestError("tool_choice", 'tool_choice: use "auto", "none", "required" or a function');
}

function formatToChat(format: Record<string, any> | undefined): unknown {
  if (!format || format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    return {
      type: "json_schema",
      json_schema: {
        name: format.name ?? "response",
        schema: format.schema ?? {},
        ...(typeof format.strict === "boolean" ? { strict: format.strict } : {}),
        ...(format.description ? { description: format.description } : {}),
      },
    };
  }
  throw new DialectRequestError("text.format.type", `text.format.type: "${format.type}" is not supported`);
}

export interface TranslatedResponsesRequest {
  chat: Record<string, any>;
  /** The conversation without the instructions (what `previous_response_id` continues from). */
  conversation: ChatMessage[];
}

/** The ids of the `item_reference` inputs, each resolved (undefined when unknown) before translation. */
async function resolveReferences(
  input: ResponsesRequest["input"],
  history: ResponseHistory,
  scope: ResponseScope | null,
): Promise<Map<string, unknown>> {
  const ids = new Set<string>();
  if (Array.isArray(input)) {
    for (const item of input) {
      if ((item as any)?.type === "item_reference" && typeof (item as any).id === "string")
        ids.add((item as any).id);
    }
  }
  const resolved = new Map<string, unknown>();
  await Promise.all([...ids].map(async (id) => resolved.set(id, await history.item(scope, id))));
  return resolved;
}

/**
 * A Responses request as the chat/completions request an open model serves. `previous_response_id` and
 * `item_reference`s are looked up in the attempt's history (`scope`); an unknown id is a 400, as OpenAI
 * answers.
 */
export async function responsesToChat(
  r: ResponsesRequest,
  history: ResponseHistory,
  scope: ResponseScope | null,
): Promise<TranslatedResponsesRequest> {
  let previous: unknown[] = [];
  if (r.previous_response_id) {
    const found = await history.conversation(scope, r.previous_response_id);
    if (!found) {
      throw new DialectRequestError(
        "previous_response_id",
        `previous_response_id: no response "${r.previous_response_id}" for this rollout attempt (responses are kept per attempt, and not at all with store: false)`,
      );
    }
    previous = found;
  }
  const references = await resolveReferences(r.input, history, scope);
  const conversation = [
    ...(previous as ChatMessage[]),
    ...inputToMessages(r.input, (id) => references.get(id)),
  ];
  const messages = r.instructions
    ? [{ role: "system", content: r.instructions }, ...conversation]
    : conversation;
  const chat: Record<string, any> = { model: r.model, messages };
  if (r.tools?.length) chat.tools = toolsToChat(r.tools);
  if (r.tool_choice !== undefined && r.tool_choice !== null)
    chat.tool_choice = toolChoiceToChat(r.tool_choice);
  if (typeof r.parallel_tool_calls === "boolean" && chat.tools)
    chat.parallel_tool_calls = r.parallel_tool_calls;
  if (r.max_output_tokens) chat.max_tokens = r.max_output_tokens;
  if (typeof r.temperature === "number") chat.temperature = r.temperature;
  if (typeof r.top_p === "number") chat.top_p = r.top_p;
  if (typeof r.top_logprobs === "number" && r.top_logprobs > 0) {
    chat.logprobs = true;
    chat.top_logprobs = r.top_logprobs;
  }
  const responseFormat = formatToChat(r.text?.format);
  if (responseFormat) chat.response_format = responseFormat;
  if (r.stream) chat.stream = true;
  return { chat, conversation };
}
