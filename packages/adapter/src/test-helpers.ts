import type { Attributes, Span } from "@agl/core";

/** Compact span construction for tests and benchmarks (not exported from the package). */
export interface SpanSpec {
  id: string;
  parent?: string | null;
  name: string;
  start?: number | null;
  end?: number | null;
  attributes?: Attributes;
  seq?: number;
  rollout?: string;
}

export function mkSpan(spec: SpanSpec): Span {
  return {
    rollout_id: spec.rollout ?? "ro-test",
    attempt_id: "at-test",
    sequence_id: spec.seq ?? 0,
    trace_id: "t".repeat(32),
    span_id: spec.id,
    parent_id: spec.parent ?? null,
    name: spec.name,
    status: { status_code: "OK", description: null },
    attributes: spec.attributes ?? {},
    events: [],
    links: [],
    start_time: spec.start === undefined ? 0 : spec.start,
    end_time: spec.end === undefined ? 1 : spec.end,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

/** Attributes of an Agent Lightning client LLM span (`openai.chat.completion`), as its tracer writes them. */
export function llmAttrs(opts: {
  responseId: string;
  prompt?: string;
  completion?: string;
  promptIds?: number[];
  responseIds?: number[];
  logprobs?: number[];
}): Attributes {
  const a: Attributes = {
    "gen_ai.request.model": "m",
    "gen_ai.request.temperature": 1,
    "gen_ai.response.id": opts.responseId,
    "gen_ai.response.model": "m",
    "gen_ai.prompt.0.role": "user",
    "gen_ai.prompt.0.content": opts.prompt ?? "hi",
    "gen_ai.completion.0.role": "assistant",
    "gen_ai.completion.0.content": opts.completion ?? "hello",
    "gen_ai.completion.0.finish_reason": "stop",
  };
  if (opts.promptIds) a.prompt_token_ids = opts.promptIds;
  if (opts.responseIds) a.response_token_ids = opts.responseIds;
  if (opts.logprobs) {
    a["logprobs.content"] = JSON.stringify(
      opts.logprobs.map((logprob, i) => ({ token: `t${i}`, logprob, bytes: null, top_logprobs: [] })),
    );
  }
  return a;
}

/** Attributes of a v0.3 `emit_reward` span. */
export function rewardAttrs(value: number): Attributes {
  return { "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": value };
}
