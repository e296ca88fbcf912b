import type { Attributes } from "@agl/core";
import {
  firstNumber,
  firstString,
  groupWithout,
  hasPrefix,
  maybeJson,
  unflattenPrefix,
} from "../attributes.js";
import {
  type ChatMessage,
  type ContentPart,
  canonicalArguments,
  fromOpenAIMessage,
  fromOpenAIMessages,
  fromOpenAITools,
  type LlmCallFamily,
  normalizeFinishReason,
  normalizeMessage,
  type ToolDefinition,
} from "../llm-call.js";

/** What a family reader extracts; token ids and ids common to all families are read elsewhere. */
export interface FamilyRead {
  family: LlmCallFamily;
  input: ChatMessage[];
  output: ChatMessage[];
  tools: ToolDefinition[];
  model: string | null;
  provider: string | null;
  responseId: string | null;
  usage: { inputTokens: number | null; outputTokens: number | null } | null;
  finishReason: string | null;
  request: Record<string, unknown>;
  response: Record<string, unknown>;
  rawPrompt: unknown;
  rawCompletion: unknown;
}

const TOKEN_KEYS = [
  "messages",
  "choices",
  "prompt_token_ids",
  "response_token_ids",
  "token_ids",
  "functions",
];

/**
 * What both GenAI semconv generations record the same way: model, provider, response id, usage, and the
 * `gen_ai.request` / `gen_ai.response` groups minus messages, choices and token keys (metadata).
 */
function genAiMeta(a: Attributes, request = unflattenPrefix(a, "gen_ai.request")) {
  return {
    model: firstString(a, "gen_ai.response.model", "gen_ai.request.model"),
    provider: firstString(a, "gen_ai.provider.name", "gen_ai.system"),
    responseId: firstString(a, "gen_ai.response.id"),
    usage: usageOf(a, GENAI_USAGE_IN, GENAI_USAGE_OUT),
    request: withoutTokenKeys(request),
    response: withoutTokenKeys(unflattenPrefix(a, "gen_ai.response")),
  };
}

function withoutTokenKeys(group: unknown): Record<string, unknown> {
  if (typeof group !== "object" || group === null || Array.isArray(group)) return {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(group)) if (!TOKEN_KEYS.includes(k)) out[k] = v;
  return out;
}

function usageOf(a: Attributes, inKeys: string[], outKeys: string[]) {
  const inputTokens = firstNumber(a, ...inKeys);
  const outputTokens = firstNumber(a, ...outKeys);
  return inputTokens === null && outputTokens === null ? null : { inputTokens, outputTokens };
}

const GENAI_USAGE_IN = ["gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"];
const GENAI_USAGE_OUT = ["gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"];

/** `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`: our tracer, Agent Lightning, OpenLLMetry ≤ 0.22, LiteLLM. */
export function readGenAiOld(a: Attributes): FamilyRead | null {
  if (!hasPrefix(a, "gen_ai.prompt") && !hasPrefix(a, "gen_ai.completion")) return null;
  const rawPrompt = unflattenPrefix(a, "gen_ai.prompt");
  const rawCompletion = unflattenPrefix(a, "gen_ai.completion");
  const toMessage = (m: any): ChatMessage => {
    let content = m?.content;
    // OpenLLMetry writes JSON.stringify(content) for non-strings: "null", or a JSON list of parts.
    if (content === "null") content = null;
    else if (typeof content === "string") {
      const parsed = maybeJson(content);
      if (Array.isArray(parsed) && parsed.every((p) => typeof p === "object" && p && "type" in p))
        content = parsed;
    }
    const toolCalls = asList(maybeJson(m?.tool_calls)).map((c: any) => ({
      id: c?.id ?? null,
      type: "function" as const,
      function: {
        name: c?.function?.name ?? c?.name ?? "",
        arguments: c?.function?.arguments ?? c?.arguments,
      },
    }));
    return fromOpenAIMessage({ ...m, content, tool_calls: toolCalls.length ? toolCalls : undefined });
  };
  const completions = asList(rawCompletion);
  const request = unflattenPrefix(a, "gen_ai.request") as Record<string, unknown> | undefined;
  return {
    family: "genai-old",
    input: asList(rawPrompt).map(toMessage),
    output: completions.map((m: any) => toMessage({ role: "assistant", ...m })),
    tools: fromOpenAITools(
      maybeJson(request?.tools) ?? request?.functions ?? unflattenPrefix(a, "llm.request.functions"),
    ),
    finishReason: normalizeFinishReason((completions[0] as any)?.finish_reason),
    ...genAiMeta(a, request),
    rawPrompt,
    rawCompletion,
  };
}

/** OTel GenAI semconv ≥ 1.37: `gen_ai.input.messages` / `gen_ai.output.messages` with typed parts. */
export function readGenAiNew(a: Attributes): FamilyRead | null {
  const inputRaw = maybeJson(a["gen_ai.input.messages"]);
  const outputRaw = maybeJson(a["gen_ai.output.messages"]);
  if (inputRaw === undefined && outputRaw === undefined) return null;
  const input: ChatMessage[] = [];
  const system = maybeJson(a["gen_ai.system_instructions"]);
  if (Array.isArray(system) && system.length > 0) {
    input.push(normalizeMessage({ role: "system", content: system.map(partToContent).filter(isPart) }));
  }
  for (const m of asList(inputRaw)) input.push(...fromSemconvMessage(m));
  const outputs = asList(outputRaw);
  return {
    family: "genai-new",
    input,
    output: outputs.flatMap(fromSemconvMessage),
    tools: fromOpenAITools(maybeJson(a["gen_ai.tool.definitions"])),
    finishReason: normalizeFinishReason(
      (outputs[0] as any)?.finish_reason ?? asList(a["gen_ai.response.finish_reasons"])[0],
    ),
    ...genAiMeta(a),
    rawPrompt: inputRaw,
    rawCompletion: outputRaw,
  };
}

/** One semconv message; a message holding several tool responses becomes one tool message each. */
function fromSemconvMessage(m: any): ChatMessage[] {
  const parts: any[] = asList(m?.parts);
  const role = String(m?.role ?? "user");
  const responses = parts.filter((p) => p?.type === "tool_call_response");
  if (responses.length > 0) {
    return responses.map((p) =>
      normalizeMessage({
        role: "tool",
        content: typeof p.response === "string" ? p.response : JSON.stringify(p.response ?? null),
        tool_call_id: p.id ?? undefined,
      }),
    );
  }
  const toolCalls = parts
    .filter((p) => p?.type === "tool_call")
    .map((p) => ({
      id: p.id ?? null,
      type: "function" as const,
      function: { name: String(p.name ?? ""), arguments: canonicalArguments(p.arguments) },
    }));
  const content = parts
    .filter((p) => p?.type !== "tool_call")
    .map(partToContent)
    .filter(isPart);
  return [normalizeMessage({ role, content: content.length ? content : null, tool_calls: toolCalls })];
}

function partToContent(p: any): ContentPart | null {
  if (p?.type === "text") return { type: "text", text: String(p.content ?? p.text ?? "") };
  if (p?.type === "uri" && typeof p.uri === "string") return { type: "image_url", image_url: { url: p.uri } };
  if (p?.type === "blob" && typeof p.content === "string") {
    return {
      type: "image_url",
      image_url: { url: `data:${p.mime_type ?? "image/png"};base64,${p.content}` },
    };
  }
  if (p?.type === "reasoning") return null;
  return typeof p === "object" && p !== null ? (p as ContentPart) : null;
}

const isPart = (p: ContentPart | null): p is ContentPart => p !== null;

/** Arize OpenInference: `llm.input_messages.N.message.*`, `llm.output_messages.N.message.*`. */
export function readOpenInference(a: Attributes): FamilyRead | null {
  if (!hasPrefix(a, "llm.input_messages") && a["openinference.span.kind"] !== "LLM") return null;
  const toMessage = (entry: any): ChatMessage => {
    const m = entry?.message ?? {};
    let content: ChatMessage["content"] = typeof m.content === "string" ? m.content : null;
    if (Array.isArray(m.contents)) {
      content = m.contents.map((c: any) => {
        const mc = c?.message_content ?? {};
        if (mc.type === "image")
          return { type: "image_url", image_url: { url: String(mc.image?.image?.url ?? "") } };
        return { type: "text", text: String(mc.text ?? "") };
      });
    }
    const toolCalls = asList(m.tool_calls).map((t: any) => ({
      id: t?.tool_call?.id ?? null,
      type: "function" as const,
      function: {
        name: String(t?.tool_call?.function?.name ?? ""),
        arguments: t?.tool_call?.function?.arguments,
      },
    }));
    return fromOpenAIMessage({ ...m, content, tool_calls: toolCalls.length ? toolCalls : undefined });
  };
  const tools = asList(unflattenPrefix(a, "llm.tools")).map((t: any) => maybeJson(t?.tool?.json_schema));
  const outputBody = a["output.mime_type"] === "application/json" ? maybeJson(a["output.value"]) : null;
  const invocation = maybeJson(a["llm.invocation_parameters"]);
  const request: Record<string, unknown> =
    typeof invocation === "object" && invocation !== null ? { ...(invocation as object) } : {};
  delete request.messages;
  delete request.tools;
  return {
    family: "openinference",
    input: asList(unflattenPrefix(a, "llm.input_messages")).map(toMessage),
    output: asList(unflattenPrefix(a, "llm.output_messages")).map(toMessage),
    tools: fromOpenAITools(tools),
    model: firstString(a, "llm.model_name"),
    provider: firstString(a, "llm.provider", "llm.system"),
    responseId: typeof (outputBody as any)?.id === "string" ? (outputBody as any).id : null,
    usage: usageOf(a, ["llm.token_count.prompt"], ["llm.token_count.completion"]),
    finishReason: normalizeFinishReason(
      a["llm.finish_reason"] ?? (outputBody as any)?.choices?.[0]?.finish_reason,
    ),
    request,
    response: {},
    rawPrompt: unflattenPrefix(a, "llm.input_messages"),
    rawCompletion: unflattenPrefix(a, "llm.output_messages"),
  };
}

/** Spans of the Vercel AI SDK that are one provider call (the outer `ai.generateText` is not). */
export const VERCEL_CALL_SPAN = /^ai\.[A-Za-z]+\.do(Generate|Stream)$/;

/** Vercel AI SDK telemetry (`experimental_telemetry`): `ai.prompt.messages`, `ai.response.*`. */
export function readVercel(a: Attributes, spanName: string): FamilyRead | null {
  if (!VERCEL_CALL_SPAN.test(spanName) && !VERCEL_CALL_SPAN.test(String(a["ai.operationId"] ?? "")))
    return null;
  const prompt = maybeJson(a["ai.prompt.messages"]);
  const input = asList(prompt).flatMap(fromVercelMessage);
  const text = firstString(a, "ai.response.text", "ai.result.text");
  const calls = asList(maybeJson(a["ai.response.toolCalls"] ?? a["ai.result.toolCalls"])).map((c: any) => ({
    id: c?.toolCallId ?? null,
    type: "function" as const,
    function: { name: String(c?.toolName ?? ""), arguments: canonicalArguments(c?.input ?? c?.args) },
  }));
  const output =
    text !== null || calls.length > 0
      ? [normalizeMessage({ role: "assistant", content: text, tool_calls: calls })]
      : [];
  const tools = fromOpenAITools(asList(a["ai.prompt.tools"]).map((t) => maybeJson(t)));
  const settings = groupWithout(a, "ai.settings", []);
  return {
    family: "vercel-ai",
    input,
    output,
    tools,
    model: firstString(a, "ai.response.model", "ai.model.id", "gen_ai.response.model"),
    provider: firstString(a, "ai.model.provider", "gen_ai.system"),
    responseId: firstString(a, "ai.response.id", "gen_ai.response.id"),
    usage: usageOf(
      a,
      ["ai.usage.inputTokens", "ai.usage.promptTokens", ...GENAI_USAGE_IN],
      ["ai.usage.outputTokens", "ai.usage.completionTokens", ...GENAI_USAGE_OUT],
    ),
    finishReason: normalizeFinishReason(a["ai.response.finishReason"] ?? a["ai.finishReason"]),
    request: { ...groupWithout(a, "gen_ai.request", TOKEN_KEYS), ...settings },
    response: groupWithout(a, "gen_ai.response", TOKEN_KEYS),
    rawPrompt: prompt,
    rawCompletion: { text, toolCalls: calls },
  };
}

/** A Vercel (LanguageModelV2/V3) prompt message; tool messages may carry several results. */
function fromVercelMessage(m: any): ChatMessage[] {
  const role = String(m?.role ?? "user");
  if (typeof m?.content === "string") return [normalizeMessage({ role, content: m.content })];
  const parts: any[] = asList(m?.content);
  if (role === "tool") {
    return parts
      .filter((p) => p?.type === "tool-result")
      .map((p) => {
        const out = p.output ?? { type: "json", value: p.result };
        const value = out?.value;
        const content =
          out?.type === "text" || out?.type === "error-text" || typeof value === "string"
            ? String(value)
            : JSON.stringify(value ?? null);
        return normalizeMessage({ role: "tool", content, tool_call_id: p.toolCallId ?? undefined });
      });
  }
  const content: ContentPart[] = [];
  const toolCalls: ChatMessage["tool_calls"] = [];
  for (const p of parts) {
    if (p?.type === "text") content.push({ type: "text", text: String(p.text ?? "") });
    else if (p?.type === "image" || (p?.type === "file" && String(p.mediaType ?? "").startsWith("image/"))) {
      const data = p.image ?? p.data;
      const url =
        typeof data === "string" && !/^[a-z]+:/i.test(data)
          ? `data:${p.mediaType ?? p.mimeType ?? "image/png"};base64,${data}`
          : String(data?.href ?? data ?? "");
      content.push({ type: "image_url", image_url: { url } });
    } else if (p?.type === "tool-call") {
      toolCalls.push({
        id: p.toolCallId ?? null,
        type: "function",
        function: { name: String(p.toolName ?? ""), arguments: canonicalArguments(p.input ?? p.args) },
      });
    }
  }
  return [normalizeMessage({ role, content: content.length ? content : null, tool_calls: toolCalls })];
}

/** Langfuse JS v4+: a `generation` observation with JSON input/output. */
export function readLangfuse(a: Attributes): FamilyRead | null {
  if (a["langfuse.observation.type"] !== "generation") return null;
  const inputRaw = maybeJson(a["langfuse.observation.input"]);
  const outputRaw = maybeJson(a["langfuse.observation.output"]);
  const inputMessages = Array.isArray(inputRaw) ? inputRaw : (inputRaw as any)?.messages;
  const input =
    typeof inputRaw === "string"
      ? [normalizeMessage({ role: "user", content: inputRaw })]
      : fromOpenAIMessages(inputMessages);
  let output: ChatMessage[] = [];
  if (typeof outputRaw === "string") output = [normalizeMessage({ role: "assistant", content: outputRaw })];
  else if (Array.isArray((outputRaw as any)?.choices)) {
    output = fromOpenAIMessages((outputRaw as any).choices.map((c: any) => c?.message));
  } else if (typeof outputRaw === "object" && outputRaw !== null) {
    output = [fromOpenAIMessage({ role: "assistant", ...(outputRaw as object) })];
  }
  const usage = maybeJson(a["langfuse.observation.usage_details"]) as any;
  const params = maybeJson(a["langfuse.observation.model.parameters"]);
  const metadata = groupWithout(a, "langfuse.observation.metadata", []);
  return {
    family: "langfuse",
    input,
    output,
    tools: fromOpenAITools((inputRaw as any)?.tools),
    model: firstString(a, "langfuse.observation.model.name"),
    provider: null,
    responseId: firstString(a, "langfuse.observation.metadata.response_id", "gen_ai.response.id"),
    usage:
      usage && typeof usage === "object"
        ? { inputTokens: usage.input ?? usage.promptTokens ?? null, outputTokens: usage.output ?? null }
        : null,
    finishReason: normalizeFinishReason((outputRaw as any)?.finish_reason ?? metadata.finish_reason),
    request: typeof params === "object" && params !== null ? (params as Record<string, unknown>) : {},
    response: {},
    rawPrompt: inputRaw,
    rawCompletion: outputRaw,
  };
}

/** Agent Lightning's Weave tracer: `agentlightning.operation.input.*` / `.output.*`. */
export function readWeave(a: Attributes): FamilyRead | null {
  if (!hasPrefix(a, "agentlightning.operation.output")) return null;
  const inputs = unflattenPrefix(a, "agentlightning.operation.input") as any;
  const outputs = unflattenPrefix(a, "agentlightning.operation.output") as any;
  const messages = maybeJson(inputs?.messages);
  const choices = asList(maybeJson(outputs?.choices));
  return {
    family: "weave",
    input: fromOpenAIMessages(messages),
    output: fromOpenAIMessages(choices.map((c: any) => c?.message).filter(Boolean)),
    tools: fromOpenAITools(maybeJson(inputs?.tools)),
    model: typeof outputs?.model === "string" ? outputs.model : (inputs?.model ?? null),
    provider: null,
    responseId: typeof outputs?.id === "string" ? outputs.id : null,
    usage: outputs?.usage
      ? {
          inputTokens: outputs.usage.prompt_tokens ?? null,
          outputTokens: outputs.usage.completion_tokens ?? null,
        }
      : null,
    finishReason: normalizeFinishReason(choices[0]?.finish_reason),
    request: {},
    response: {},
    rawPrompt: messages,
    rawCompletion: choices,
  };
}

function asList(value: unknown): any[] {
  return Array.isArray(value) ? value : [];
}
