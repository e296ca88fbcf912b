/**
 * The one internal record every reader produces, whatever attribute family a span uses.
 * Messages are in OpenAI chat format so they can be fed back to a model or used for fine-tuning.
 */

export interface ToolCall {
  id: string | null;
  type: "function";
  function: { name: string; arguments: string };
}

export type ContentPart =
  | { type: "text"; text: string }
  | { type: "image_url"; image_url: { url: string } }
  | { type: string; [key: string]: unknown };

export interface ChatMessage {
  role: string;
  content: string | ContentPart[] | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface ToolDefinition {
  type: "function";
  function: { name: string; description?: string; parameters?: unknown };
}

export type LlmCallFamily =
  /** `gen_ai.prompt.N.*` / `gen_ai.completion.N.*`: our tracer, OpenLLMetry before semconv 1.37, LiteLLM. */
  | "genai-old"
  /** `gen_ai.input.messages` / `gen_ai.output.messages` (OTel GenAI semconv ≥ 1.37). */
  | "genai-new"
  /** `llm.input_messages.N.message.*` (Arize OpenInference). */
  | "openinference"
  /** `ai.prompt.messages`, `ai.response.*` on `ai.*.doGenerate|doStream` (Vercel AI SDK telemetry). */
  | "vercel-ai"
  /** `langfuse.observation.*` with type `generation` (Langfuse JS v4+). */
  | "langfuse"
  /** `agentlightning.operation.*` (Agent Lightning's Weave tracer). */
  | "weave"
  /** `raw_gen_ai_request` with `llm.hosted_vllm.*` (Agent Lightning's LiteLLM proxy). */
  | "litellm-raw"
  /** Only token ids were found (e.g. a proxy span with no messages). */
  | "tokens-only";

export interface LlmCall {
  spanId: string;
  spanName: string;
  family: LlmCallFamily;
  responseId: string | null;
  model: string | null;
  provider: string | null;
  input: ChatMessage[];
  output: ChatMessage[];
  tools: ToolDefinition[];
  promptTokenIds: number[] | null;
  responseTokenIds: number[] | null;
  /** One logprob per response token, when the server returned them. */
  logprobs: number[] | null;
  usage: { inputTokens: number | null; outputTokens: number | null } | null;
  finishReason: string | null;
  imageUrls: string[];
  /** What the span recorded about the request (sampling parameters etc.), without messages or token keys. */
  request: Record<string, unknown>;
  /** What the span recorded about the response, without choices or token keys. */
  response: Record<string, unknown>;
  /** The prompt as the span stored it (unflattened `gen_ai.prompt` when present), for `raw_content`. */
  rawPrompt: unknown;
  rawCompletion: unknown;
  startTime: number | null;
  endTime: number | null;
}

/** Finish reasons differ in spelling across families ("tool-calls", "tool_call"); use OpenAI's. */
export function normalizeFinishReason(reason: unknown): string | null {
  if (typeof reason !== "string" || reason === "") return null;
  const r = reason.toLowerCase().replaceAll("-", "_");
  if (r === "tool_call" || r === "tool_calls" || r === "function_call") return "tool_calls";
  return r;
}

/** Arguments as compact JSON when they parse, so `{"a": 2}` and `{"a":2}` compare equal. */
export function canonicalArguments(args: unknown): string {
  if (args === undefined || args === null) return "{}";
  if (typeof args !== "string") return JSON.stringify(args);
  try {
    return JSON.stringify(JSON.parse(args));
  } catch {
    return args;
  }
}

/**
 * Bring a message to one shape: text-only part lists become a string, an assistant message that only
 * calls tools has null content, tool-call arguments are canonical JSON, empty optional fields are gone.
 */
export function normalizeMessage(message: ChatMessage): ChatMessage {
  let content = message.content;
  if (Array.isArray(content)) {
    if (content.every((p) => p.type === "text"))
      content = content.map((p) => (p as { text: string }).text).join("");
  }
  const toolCalls = (message.tool_calls ?? []).map((c) => ({
    id: c.id ?? null,
    type: "function" as const,
    function: { name: c.function.name, arguments: canonicalArguments(c.function.arguments) },
  }));
  if (toolCalls.length > 0 && (content === "" || content === undefined)) content = null;
  if (content === undefined) content = null;
  const out: ChatMessage = { role: message.role, content };
  if (toolCalls.length > 0) out.tool_calls = toolCalls;
  if (message.tool_call_id) out.tool_call_id = message.tool_call_id;
  if (message.name) out.name = message.name;
  return out;
}

export function imageUrlsOf(messages: ChatMessage[]): string[] {
  const urls: string[] = [];
  for (const m of messages) {
    if (!Array.isArray(m.content)) continue;
    for (const part of m.content) {
      if (part.type === "image_url") {
        const img = (part as { image_url: unknown }).image_url;
        const url = typeof img === "string" ? img : (img as { url?: unknown } | null)?.url;
        if (typeof url === "string") urls.push(url);
      }
    }
  }
  return urls;
}

/** OpenAI-format messages (a request body's `messages`) into ChatMessages. */
export function fromOpenAIMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value)) return [];
  return value
    .filter((m): m is Record<string, unknown> => typeof m === "object" && m !== null)
    .map((m) => fromOpenAIMessage(m));
}

export function fromOpenAIMessage(m: Record<string, unknown>): ChatMessage {
  const rawContent = m.content;
  let content: ChatMessage["content"] = null;
  if (typeof rawContent === "string") content = rawContent;
  else if (Array.isArray(rawContent)) content = rawContent.map(fromOpenAIPart);
  const toolCalls = Array.isArray(m.tool_calls)
    ? (m.tool_calls as any[]).map((c) => ({
        id: typeof c?.id === "string" ? c.id : null,
        type: "function" as const,
        function: {
          name: String(c?.function?.name ?? c?.name ?? ""),
          arguments: canonicalArguments(c?.function?.arguments ?? c?.arguments),
        },
      }))
    : undefined;
  return normalizeMessage({
    role: String(m.role ?? "user"),
    content,
    tool_calls: toolCalls,
    tool_call_id: typeof m.tool_call_id === "string" ? m.tool_call_id : undefined,
    name: typeof m.name === "string" ? m.name : undefined,
  });
}

function fromOpenAIPart(part: unknown): ContentPart {
  if (typeof part === "string") return { type: "text", text: part };
  const p = (part ?? {}) as Record<string, any>;
  if (p.type === "text") return { type: "text", text: String(p.text ?? "") };
  if (p.type === "image_url") {
    const url = typeof p.image_url === "string" ? p.image_url : p.image_url?.url;
    return { type: "image_url", image_url: { url: String(url ?? "") } };
  }
  return p as ContentPart;
}

/** OpenAI `tools` (or the older `functions`) into ToolDefinitions. */
export function fromOpenAITools(value: unknown): ToolDefinition[] {
  if (!Array.isArray(value)) return [];
  const out: ToolDefinition[] = [];
  for (const t of value as any[]) {
    const fn = t?.function ?? t;
    if (typeof fn?.name !== "string") continue;
    const def: ToolDefinition = { type: "function", function: { name: fn.name } };
    if (typeof fn.description === "string") def.function.description = fn.description;
    const params = fn.parameters ?? fn.inputSchema ?? fn.input_schema ?? fn.arguments;
    if (params !== undefined)
      def.function.parameters = typeof params === "string" ? safeParse(params) : params;
    out.push(def);
  }
  return out;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
