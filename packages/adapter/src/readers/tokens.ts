import type { Attributes } from "@agl/core";
import { asTokenIds, maybeJson, parseLiteral } from "../attributes.js";

/**
 * Token ids and logprobs, from every place the reference puts them:
 * - our tracer / Agent Lightning's client spans: `prompt_token_ids`, `response_token_ids`, `logprobs.content` (JSON);
 * - Agent Lightning's Weave tracer: `agentlightning.operation.output.{prompt_token_ids, response_token_ids.0,
 *   choices.0.token_ids, choices.0.provider_specific_fields.token_ids}`;
 * - the LiteLLM proxy's `raw_gen_ai_request`: `llm.hosted_vllm.{prompt_token_ids, choices, response_token_ids}`
 *   as stringified Python literals;
 * - a recorded vLLM response body (OpenInference's `output.value`, a proxy's `response` JSON).
 */
export interface TokenFields {
  promptTokenIds: number[] | null;
  responseTokenIds: number[] | null;
  logprobs: number[] | null;
  responseId: string | null;
}

const WEAVE = "agentlightning.operation.output";
const VLLM = "llm.hosted_vllm";

export function readTokenFields(a: Attributes): TokenFields {
  const body = responseBody(a);
  const vllmChoice = firstChoice(parseLiteral(a[`${VLLM}.choices`]));
  const bodyChoice = firstChoice((body as any)?.choices);
  // `choices` kept whole (a list, or its JSON), as the Weave reader accepts for the message too
  const weaveChoice = firstChoice(a[`${WEAVE}.choices`]);

  const promptTokenIds =
    asTokenIds(a.prompt_token_ids) ??
    asTokenIds(a[`${WEAVE}.prompt_token_ids`]) ??
    asTokenIds(a[`${VLLM}.prompt_token_ids`]) ??
    asTokenIds((body as any)?.prompt_token_ids) ??
    asTokenIds(bodyChoice?.prompt_token_ids);

  const responseTokenIds =
    listOrFirst(a.response_token_ids) ??
    asTokenIds(a["choices.0.token_ids"]) ??
    asTokenIds(a[`${WEAVE}.response_token_ids.0`]) ??
    listOrFirst(a[`${WEAVE}.response_token_ids`]) ??
    asTokenIds(a[`${WEAVE}.choices.0.token_ids`]) ??
    asTokenIds(a[`${WEAVE}.choices.0.provider_specific_fields.token_ids`]) ??
    asTokenIds(weaveChoice?.token_ids) ??
    asTokenIds(weaveChoice?.provider_specific_fields?.token_ids) ??
    listOrFirst(a[`${VLLM}.response_token_ids`]) ??
    asTokenIds(vllmChoice?.token_ids) ??
    asTokenIds(vllmChoice?.provider_specific_fields?.token_ids) ??
    asTokenIds(bodyChoice?.token_ids);

  const logprobs =
    logprobNumbers(a["agl.response_logprobs"]) ??
    logprobNumbers(maybeJson(a["logprobs.content"])) ??
    logprobNumbers(maybeJson(a.logprobs)) ??
    logprobNumbers(vllmChoice?.logprobs) ??
    logprobNumbers(bodyChoice?.logprobs);

  const responseId =
    str(a["gen_ai.response.id"]) ??
    str(a[`${WEAVE}.id`]) ??
    str(a[`${VLLM}.id`]) ??
    str((body as any)?.id) ??
    str(a["ai.response.id"]);

  return { promptTokenIds, responseTokenIds, logprobs, responseId };
}

/** A whole chat-completion response recorded as JSON on the span, if any. */
function responseBody(a: Attributes): unknown {
  for (const key of ["output.value", "agl.proxy.response"]) {
    const v = a[key];
    if (typeof v !== "string" || !v.includes("choices")) continue;
    const parsed = maybeJson(v);
    if (typeof parsed === "object" && parsed !== null) return parsed;
  }
  return null;
}

function firstChoice(value: unknown): any {
  const v = parseLiteral(value);
  if (Array.isArray(v)) return parseLiteral(v[0]) ?? null;
  return null;
}

/** `[ids]` or `[[ids], ...]` (vLLM's older `response_token_ids` is one list per choice). */
function listOrFirst(value: unknown): number[] | null {
  const v = parseLiteral(value);
  if (Array.isArray(v) && Array.isArray(v[0])) return asTokenIds(v[0]);
  return asTokenIds(v);
}

/** `{content:[{logprob}]}`, `[{logprob}]`, `{token_logprobs:[..]}` or `[numbers]` → numbers. */
export function logprobNumbers(value: unknown): number[] | null {
  if (value === null || value === undefined) return null;
  let list: unknown = value;
  if (typeof value === "object" && !Array.isArray(value)) {
    const v = value as Record<string, unknown>;
    list = v.content ?? v.token_logprobs ?? null;
  }
  if (!Array.isArray(list) || list.length === 0) return null;
  const out: number[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const item = list[i];
    const n = typeof item === "number" ? item : (item as { logprob?: unknown } | null)?.logprob;
    if (typeof n !== "number" || !Number.isFinite(n)) return null;
    out[i] = n;
  }
  return out;
}

function str(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : null;
}
