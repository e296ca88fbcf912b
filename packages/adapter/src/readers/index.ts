import type { Span } from "@agl/core";
import { attrs } from "../conventions.js";
import { imageUrlsOf, type LlmCall } from "../llm-call.js";
import {
  type FamilyRead,
  readGenAiNew,
  readGenAiOld,
  readLangfuse,
  readOpenInference,
  readVercel,
  readWeave,
  VERCEL_CALL_SPAN,
} from "./families.js";
import { readTokenFields } from "./tokens.js";

export { logprobNumbers, readTokenFields, type TokenFields } from "./tokens.js";

/** The default LLM-call pattern of Agent Lightning's TracerTraceToTriplet. */
export const AGL_LLM_CALL_PATTERN = /openai\.chat\.completion/;

const LLM_OPERATIONS = new Set(["chat", "text_completion", "generate_content", "completion"]);

/**
 * Whether a span is one LLM call by any known convention: Agent Lightning's span name, GenAI's
 * `gen_ai.operation.name`, OpenLLMetry's `llm.request.type`, OpenInference's span kind, the Vercel
 * AI SDK's `doGenerate`/`doStream`, or Langfuse's `generation`. The LiteLLM proxy's two spans per
 * request (`litellm_request` ⊃ `raw_gen_ai_request`) are not calls here, or each request would count
 * twice: `ProxySpansToTriplets` reads them, and they lend token ids to client spans (see
 * {@link isTokenSource}).
 */
export function looksLikeLlmCall(span: Span): boolean {
  if (AGL_LLM_CALL_PATTERN.test(span.name)) return true;
  if (VERCEL_CALL_SPAN.test(span.name)) return true;
  const a = attrs(span);
  const op = a["gen_ai.operation.name"];
  if (typeof op === "string" && LLM_OPERATIONS.has(op)) return true;
  const type = a["llm.request.type"];
  if (type === "chat" || type === "completion") return true;
  if (a["openinference.span.kind"] === "LLM") return true;
  return a["langfuse.observation.type"] === "generation";
}

/** Spans that may carry token ids for a call recorded elsewhere (joined by response id). */
export function isTokenSource(span: Span): boolean {
  return span.name === "raw_gen_ai_request" || span.name === "litellm_request" || looksLikeLlmCall(span);
}

/**
 * Decode a span into the normalised LLM-call record, trying each attribute family; token ids are
 * read from every known location regardless of family. Null when the span carries neither
 * messages nor token ids.
 */
export function readLlmCall(span: Span): LlmCall | null {
  const a = attrs(span);
  const read: FamilyRead | null =
    readVercel(a, span.name) ??
    readGenAiNew(a) ??
    readOpenInference(a) ??
    readLangfuse(a) ??
    readGenAiOld(a) ??
    readWeave(a);
  const tokens = readTokenFields(a);
  if (!read && !tokens.promptTokenIds && !tokens.responseTokenIds) return null;
  const input = read?.input ?? [];
  return {
    spanId: span.span_id,
    spanName: span.name,
    family: read?.family ?? (span.name === "raw_gen_ai_request" ? "litellm-raw" : "tokens-only"),
    responseId: read?.responseId ?? tokens.responseId,
    model: read?.model ?? null,
    provider: read?.provider ?? null,
    input,
    output: read?.output ?? [],
    tools: read?.tools ?? [],
    promptTokenIds: tokens.promptTokenIds,
    responseTokenIds: tokens.responseTokenIds,
    logprobs: tokens.logprobs,
    usage: read?.usage ?? null,
    finishReason: read?.finishReason ?? null,
    imageUrls: imageUrlsOf(input),
    request: read?.request ?? {},
    response: read?.response ?? {},
    rawPrompt: read?.rawPrompt ?? null,
    rawCompletion: read?.rawCompletion ?? null,
    startTime: span.start_time ?? null,
    endTime: span.end_time ?? null,
  };
}
