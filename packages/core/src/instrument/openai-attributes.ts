/**
 * gen_ai.* attributes (the OpenLLMetry "old" form, what Agent Lightning's adapters read) for OpenAI
 * chat and text completions, plus vLLM's token ids and logprobs (Agent Lightning v0.3 §4).
 */
import { stringify } from "../tracing/flatten.js";

type Attrs = Record<string, string | number | boolean | number[]>;
export type CallKind = "chat" | "completion";

const set = (out: Attrs, key: string, value: unknown) => {
  if (value === undefined || value === null) return;
  if (typeof value === "string" || typeof value === "boolean") out[key] = value;
  else if (typeof value === "number" && Number.isFinite(value)) out[key] = value;
  else out[key] = stringify(value);
};

const contentText = (content: unknown): unknown =>
  typeof content === "string" || content === null || content === undefined ? content : stringify(content);

function setToolCalls(out: Attrs, prefix: string, calls: unknown): void {
  if (!Array.isArray(calls)) return;
  calls.forEach((call: any, j) => {
    const fn = call?.function ?? call?.custom ?? {};
    set(out, `${prefix}.tool_calls.${j}.id`, call?.id);
    set(out, `${prefix}.tool_calls.${j}.type`, call?.type);
    set(out, `${prefix}.tool_calls.${j}.name`, fn.name);
    set(out, `${prefix}.tool_calls.${j}.arguments`, fn.arguments ?? fn.input);
  });
}

export function requestAttributes(body: any, kind: CallKind, captureContent: boolean): Attrs {
  const out: Attrs = { "gen_ai.system": "openai", "llm.request.type": kind };
  if (!body || typeof body !== "object") return out;
  set(out, "gen_ai.request.model", body.model);
  set(out, "gen_ai.request.temperature", body.temperature);
  set(out, "gen_ai.request.max_tokens", body.max_tokens ?? body.max_completion_tokens);
  set(out, "gen_ai.request.top_p", body.top_p);
  set(out, "gen_ai.request.frequency_penalty", body.frequency_penalty);
  set(out, "gen_ai.request.presence_penalty", body.presence_penalty);
  set(out, "gen_ai.request.n", body.n);
  set(out, "gen_ai.request.seed", body.seed);
  set(out, "llm.is_streaming", body.stream === true);
  const tools: any[] = Array.isArray(body.tools)
    ? body.tools.map((t: any) => t?.function ?? t)
    : Array.isArray(body.functions)
      ? body.functions
      : [];
  tools.forEach((fn, i) => {
    set(out, `gen_ai.request.functions.${i}.name`, fn?.name);
    set(out, `gen_ai.request.functions.${i}.description`, fn?.description);
    if (fn?.parameters !== undefined)
      set(out, `gen_ai.request.functions.${i}.parameters`, stringify(fn.parameters));
  });
  if (!captureContent) return out;
  if (kind === "chat") {
    const messages: any[] = Array.isArray(body.messages) ? body.messages : [];
    messages.forEach((m, i) => {
      const p = `gen_ai.prompt.${i}`;
      set(out, `${p}.role`, m?.role);
      set(out, `${p}.content`, contentText(m?.content));
      set(out, `${p}.name`, m?.name);
      set(out, `${p}.tool_call_id`, m?.tool_call_id);
      setToolCalls(out, p, m?.tool_calls);
    });
  } else {
    const prompts =
      Array.isArray(body.prompt) && typeof body.prompt[0] !== "number" ? body.prompt : [body.prompt];
    prompts.forEach((prompt: unknown, i: number) => {
      set(out, `gen_ai.prompt.${i}.role`, "user");
      set(out, `gen_ai.prompt.${i}.content`, contentText(prompt));
    });
  }
  return out;
}

const intList = (v: unknown): number[] | undefined =>
  Array.isArray(v) && v.every((x) => typeof x === "number") ? (v as number[]) : undefined;

/** Completions' `{tokens, token_logprobs}` as chat-style `[{token, logprob}]`, so readers see one shape. */
function completionLogprobs(lp: any): unknown {
  if (!Array.isArray(lp?.token_logprobs)) return undefined;
  return lp.token_logprobs.map((logprob: number, i: number) => ({ token: lp.tokens?.[i] ?? null, logprob }));
}

export function responseAttributes(resp: any, kind: CallKind, captureContent: boolean): Attrs {
  const out: Attrs = {};
  if (!resp || typeof resp !== "object") return out;
  set(out, "gen_ai.response.id", resp.id);
  set(out, "gen_ai.response.model", resp.model);
  set(out, "gen_ai.openai.system_fingerprint", resp.system_fingerprint);
  const choices: any[] = Array.isArray(resp.choices) ? resp.choices : [];
  choices.forEach((choice, position) => {
    const p = `gen_ai.completion.${choice?.index ?? position}`;
    set(out, `${p}.finish_reason`, choice?.finish_reason);
    if (kind === "chat") {
      const m = choice?.message ?? {};
      set(out, `${p}.role`, m.role ?? "assistant");
      if (captureContent) {
        set(out, `${p}.content`, contentText(m.content));
        set(out, `${p}.refusal`, m.refusal);
        setToolCalls(out, p, m.tool_calls);
        if (m.function_call) {
          set(out, `${p}.tool_calls.0.name`, m.function_call.name);
          set(out, `${p}.tool_calls.0.arguments`, m.function_call.arguments);
        }
      }
    } else {
      set(out, `${p}.role`, "assistant");
      if (captureContent) set(out, `${p}.content`, choice?.text);
    }
  });
  const usage = resp.usage;
  if (usage) {
    set(out, "gen_ai.usage.prompt_tokens", usage.prompt_tokens);
    set(out, "gen_ai.usage.completion_tokens", usage.completion_tokens);
    set(out, "gen_ai.usage.total_tokens", usage.total_tokens);
    set(out, "llm.usage.total_tokens", usage.total_tokens);
  }
  const first = choices[0];
  const promptIds = intList(resp.prompt_token_ids) ?? intList(first?.prompt_token_ids);
  if (promptIds) out.prompt_token_ids = promptIds;
  const responseIds =
    intList(Array.isArray(resp.response_token_ids) ? resp.response_token_ids[0] : undefined) ??
    intList(first?.token_ids) ??
    intList(first?.provider_specific_fields?.token_ids);
  if (responseIds) out.response_token_ids = responseIds;
  const lp = first?.logprobs;
  if (lp) {
    const content = kind === "chat" ? lp.content : completionLogprobs(lp);
    if (content !== undefined && content !== null) out["logprobs.content"] = stringify(content);
    if (lp.refusal !== undefined && lp.refusal !== null) out["logprobs.refusal"] = stringify(lp.refusal);
  }
  return out;
}
