import { randomBytes } from "node:crypto";
import type { Attributes, AttributeValue, SpanInput } from "@agl/core";
import type { AttributionStyle, Mode } from "./routes.js";

/** Everything known about one proxied call when it ends. */
export interface CallRecord {
  rolloutId: string;
  attemptId: string;
  sequenceId: number;
  style: AttributionStyle;
  mode: Mode | null;
  sessionId: string | null;
  isChat: boolean;
  /** The client's API when it was not chat/completions (`/v1/responses`, `/v1/messages`, translated). */
  clientApi?: "responses" | "messages" | null;
  /** The body as sent upstream (after rewrites), parsed and as the exact text sent. */
  request: Record<string, any>;
  requestText?: string;
  /** The model the client asked for, before the rewrite. */
  clientModel: unknown;
  /** The parsed (or, for streams, reassembled) upstream response; null when there was none. */
  response: Record<string, any> | null;
  /** The upstream body text for non-streamed calls, recorded verbatim when body capture is on. */
  rawResponse: string | null;
  httpStatus: number | null;
  error: string | null;
  stream: boolean;
  /** The call did not complete (client went away, upstream died mid-stream, timeout). */
  partial: boolean;
  backend: string | null;
  modelVersion: string | number | null;
  /**
   * The oldest version that produced a token, when the backend resumed the call on newer weights
   * mid-generation (`x-agl-model-version-start`); `modelVersion` is then the one that finished it.
   */
  modelVersionStart?: string | number | null;
  /** The policy the call was routed to (multi-policy proxies), or null. */
  policy?: string | null;
  retryCount: number;
  startMs: number;
  endMs: number;
  ttftMs: number | null;
  /** The span id, when chosen before the call (Responses ids name it); else a random one. */
  spanId?: string | null;
  /** Attributes the client dialect adds to a successful call's span (the Responses state). */
  dialectAttributes?: Attributes | null;
}

export interface CaptureOptions {
  /** Record the request and response bodies as JSON strings (`agl.proxy.request`/`.response`). */
  captureBodies: boolean;
  /** Bodies longer than this are truncated (flagged by `agl.proxy.body_truncated`). */
  maxBodyChars: number;
}

const isIntArray = (v: unknown): v is number[] => Array.isArray(v) && v.every((x) => Number.isInteger(x));

function setIfDefined(attrs: Attributes, key: string, value: unknown): void {
  if (value === undefined || value === null) return;
  if (typeof value === "string" || typeof value === "number" || typeof value === "boolean") {
    attrs[key] = value;
  } else if (Array.isArray(value) && value.every((x) => typeof x === "string" || typeof x === "number")) {
    attrs[key] = value as AttributeValue;
  } else {
    attrs[key] = JSON.stringify(value);
  }
}

/** Logprob values of one choice: chat `logprobs.content[].logprob` or completions `token_logprobs`. */
export function choiceLogprobs(choice: any): number[] | null {
  const lp = choice?.logprobs;
  if (!lp || typeof lp !== "object") return null;
  const values = Array.isArray(lp.content)
    ? lp.content.map((x: any) => x?.logprob)
    : Array.isArray(lp.token_logprobs)
      ? lp.token_logprobs
      : null;
  if (!values?.every((x: unknown) => typeof x === "number" && Number.isFinite(x))) return null;
  return values;
}

function promptIdsOf(response: Record<string, any> | null): number[] | null {
  if (!response) return null;
  if (isIntArray(response.prompt_token_ids)) return response.prompt_token_ids;
  const c0 = Array.isArray(response.choices) ? response.choices[0] : undefined;
  return isIntArray(c0?.prompt_token_ids) ? c0.prompt_token_ids : null;
}

function truncate(text: string, max: number): { text: string; truncated: boolean } {
  return text.length > max ? { text: text.slice(0, max), truncated: true } : { text, truncated: false };
}

/**
 * The span for one call (format documented in README.md, read by `ProxySpansToTriplets` in @agl/adapter).
 * Name `openai.chat.completion` / `openai.completion`, as Agent Lightning's client spans, so the default
 * `llmCallMatch` finds them too.
 */
export function buildCallSpan(call: CallRecord, options: CaptureOptions): SpanInput {
  const a: Attributes = {};
  const req = call.request;
  const res = call.response;
  a["gen_ai.system"] = "openai";
  a["gen_ai.operation.name"] = call.isChat ? "chat" : "text_completion";
  setIfDefined(a, "gen_ai.request.model", req.model);
  for (const key of ["temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "n", "stop"]) {
    setIfDefined(a, `gen_ai.request.${key}`, req[key]);
  }
  setIfDefined(a, "gen_ai.request.tools", req.tools);
  setIfDefined(a, "gen_ai.request.tool_choice", req.tool_choice);

  if (call.isChat && Array.isArray(req.messages)) {
    req.messages.forEach((m: any, i: number) => {
      setIfDefined(a, `gen_ai.prompt.${i}.role`, m?.role);
      setIfDefined(a, `gen_ai.prompt.${i}.content`, m?.content);
      setIfDefined(a, `gen_ai.prompt.${i}.tool_calls`, m?.tool_calls);
      setIfDefined(a, `gen_ai.prompt.${i}.tool_call_id`, m?.tool_call_id);
      setIfDefined(a, `gen_ai.prompt.${i}.name`, m?.name);
    });
  } else if (!call.isChat) {
    setIfDefined(a, "gen_ai.prompt.0.role", "user");
    setIfDefined(a, "gen_ai.prompt.0.content", req.prompt);
  }

  const promptIds = promptIdsOf(res);
  let allIds = promptIds !== null;
  if (res) {
    setIfDefined(a, "gen_ai.response.id", res.id);
    setIfDefined(a, "gen_ai.response.model", res.model);
    const choices: any[] = Array.isArray(res.choices) ? res.choices : [];
    if (choices.length === 0) allIds = false;
    const finishReasons: string[] = [];
    choices.forEach((c, k) => {
      const i = typeof c?.index === "number" ? c.index : k;
      if (call.isChat) {
        setIfDefined(a, `gen_ai.completion.${i}.role`, c?.message?.role ?? "assistant");
        setIfDefined(a, `gen_ai.completion.${i}.content`, c?.message?.content);
        setIfDefined(a, `gen_ai.completion.${i}.tool_calls`, c?.message?.tool_calls);
      } else {
        setIfDefined(a, `gen_ai.completion.${i}.role`, "assistant");
        setIfDefined(a, `gen_ai.completion.${i}.content`, c?.text);
      }
      setIfDefined(a, `gen_ai.completion.${i}.finish_reason`, c?.finish_reason);
      if (typeof c?.finish_reason === "string") finishReasons.push(c.finish_reason);
      if (isIntArray(c?.token_ids)) {
        a[`agl.choices.${i}.token_ids`] = c.token_ids;
        if (k === 0) a.response_token_ids = c.token_ids;
      } else allIds = false;
      const lps = choiceLogprobs(c);
      if (lps) {
        a[`agl.choices.${i}.logprobs`] = lps;
        if (k === 0) a["agl.response_logprobs"] = lps;
      }
    });
    if (finishReasons.length) a["gen_ai.response.finish_reasons"] = finishReasons;
    const usage = res.usage;
    if (usage && typeof usage === "object") {
      setIfDefined(a, "gen_ai.usage.prompt_tokens", usage.prompt_tokens);
      setIfDefined(a, "gen_ai.usage.completion_tokens", usage.completion_tokens);
      setIfDefined(a, "gen_ai.usage.total_tokens", usage.total_tokens);
    }
    // Agent Lightning v0.3 client-span keys (choice 0), what its adapters read
    const c0 = choices[0];
    if (promptIds) a.prompt_token_ids = promptIds;
    // The v0.3 key repeats every token's text and bytes: the largest attribute by far. Its numbers are in
    // agl.response_logprobs, so it is kept only when it carries more (top_logprobs) or bodies are captured.
    const content = call.isChat ? c0?.logprobs?.content : undefined;
    if (
      Array.isArray(content) &&
      (options.captureBodies || content.some((x: any) => x?.top_logprobs?.length))
    ) {
      a["logprobs.content"] = JSON.stringify(content);
    }
  }

  a["agl.proxy.attribution"] = call.style;
  if (call.clientApi) a["agl.proxy.client_api"] = call.clientApi;
  if (call.mode) a["agl.proxy.mode"] = call.mode;
  if (call.sessionId) a["agl.proxy.session_id"] = call.sessionId;
  if (call.backend) a["agl.proxy.backend"] = call.backend;
  if (call.modelVersion !== null) a["agl.proxy.model_version"] = call.modelVersion;
  if (call.modelVersionStart != null) a["agl.proxy.model_version_start"] = call.modelVersionStart;
  if (call.policy != null) a["agl.proxy.policy"] = call.policy;
  if (call.clientModel !== undefined && call.clientModel !== req.model)
    setIfDefined(a, "agl.proxy.client_model", call.clientModel);
  if (call.httpStatus !== null) a["agl.proxy.http_status"] = call.httpStatus;
  const ok = call.error === null && call.httpStatus !== null && call.httpStatus < 400 && !call.partial;
  a["agl.proxy.status"] = ok ? "ok" : "error";
  if (call.error) a["agl.proxy.error"] = call.error;
  a["agl.proxy.stream"] = call.stream;
  a["agl.proxy.partial"] = call.partial;
  a["agl.proxy.retry_count"] = call.retryCount;
  a["agl.proxy.latency_ms"] = round3(call.endMs - call.startMs);
  if (call.ttftMs !== null) a["agl.proxy.ttft_ms"] = round3(call.ttftMs);
  if (ok && call.dialectAttributes) Object.assign(a, call.dialectAttributes);
  // upstreams without vLLM's return_token_ids (OpenAI, SGLang's OpenAI layer) still get recorded
  a["agl.proxy.token_ids_missing"] = ok && !allIds;

  if (options.captureBodies) {
    const reqText = truncate(call.requestText ?? JSON.stringify(req), options.maxBodyChars);
    const resText = truncate(call.rawResponse ?? (res ? JSON.stringify(res) : ""), options.maxBodyChars);
    a["agl.proxy.request"] = reqText.text;
    if (resText.text) a["agl.proxy.response"] = resText.text;
    if (reqText.truncated || resText.truncated) a["agl.proxy.body_truncated"] = true;
  }

  const traceId = randomHex(16);
  const spanId = call.spanId ?? newSpanId();
  const startS = call.startMs / 1000;
  const endS = call.endMs / 1000;
  return {
    rollout_id: call.rolloutId,
    attempt_id: call.attemptId,
    sequence_id: call.sequenceId,
    trace_id: traceId,
    span_id: spanId,
    parent_id: null,
    name: call.isChat ? "openai.chat.completion" : "openai.completion",
    status: ok
      ? { status_code: "OK", description: null }
      : { status_code: "ERROR", description: call.error ?? `HTTP ${call.httpStatus}` },
    attributes: a,
    events: [],
    links: [],
    start_time: startS,
    end_time: endS,
    context: { trace_id: traceId, span_id: spanId, is_remote: false, trace_state: {} },
    parent: null,
    resource: {
      attributes: {
        "agentlightning.rollout_id": call.rolloutId,
        "agentlightning.attempt_id": call.attemptId,
        "agentlightning.span_sequence_id": call.sequenceId,
        "agentlightning.tracer.name": "agl-proxy",
        "service.name": "agl-proxy",
      },
      schema_url: "",
    },
  };
}

/** A random span id (16 hex characters, as Agent Lightning's). */
export const newSpanId = (): string => randomHex(8);

// One entropy draw per ~170 spans instead of two per span (ids are most of a span's randomness cost).
const ID_POOL_BYTES = 4096;
let idPool = Buffer.alloc(0);
let idOffset = 0;
function randomHex(bytes: number): string {
  if (idOffset + bytes > idPool.length) {
    idPool = randomBytes(ID_POOL_BYTES);
    idOffset = 0;
  }
  const hex = idPool.toString("hex", idOffset, idOffset + bytes);
  idOffset += bytes;
  return hex;
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;
