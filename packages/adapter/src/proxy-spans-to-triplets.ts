import type { Span, Triplet } from "@agl/core";
import type { AdapterResult, DiagnosingAdapter } from "./adapter.js";
import { asTokenIds } from "./attributes.js";
import { attrs, rewardOf } from "./conventions.js";
import { DiagnosticsCollector } from "./diagnostics.js";
import type { LlmCall } from "./llm-call.js";
import { checkSpans, ProxySpansToTripletsOptionsSchema, parseOptions } from "./options.js";
import { logprobNumbers, readLlmCall } from "./readers/index.js";

export interface ProxySpansToTripletsOptions {
  /** Keep calls the proxy marked as failed (`agl.proxy.status` = "error"); default false. */
  keepFailedCalls?: boolean;
}

/**
 * Spans recorded by an LLM proxy (ours, or Agent Lightning's LiteLLM proxy) → triplets, one per call
 * with both token lists; a call with `n > 1` choices (our proxy's `agl.choices.{i}.token_ids`) gives one
 * triplet per choice, sharing the prompt, the response id and the reward. Every span of one proxied request shares its sequence id, so spans are
 * ordered by `(sequence_id, start_time)`, and each reward goes to the most recent unrewarded call
 * whose sequence id is strictly smaller than the reward's.
 */
export class ProxySpansToTriplets implements DiagnosingAdapter<Span[], Triplet[]> {
  readonly name = "ProxySpansToTriplets";
  constructor(private readonly options: ProxySpansToTripletsOptions = {}) {
    parseOptions(ProxySpansToTripletsOptionsSchema, options, "options");
  }

  adapt(spans: Span[]): Triplet[] {
    return this.adaptWithDiagnostics(spans).output;
  }

  adaptWithDiagnostics(spans: Span[]): AdapterResult<Triplet[]> {
    checkSpans(spans);
    const diagnostics = new DiagnosticsCollector();
    const ordered = spans
      .map((span, index) => ({ span, index }))
      .sort(
        (a, b) =>
          a.span.sequence_id - b.span.sequence_id ||
          (a.span.start_time ?? 0) - (b.span.start_time ?? 0) ||
          a.index - b.index,
      )
      .map((x) => x.span);

    interface Item {
      call: LlmCall;
      seq: number;
      /** The policy the proxy routed the call to (`agl.proxy.policy`), null in single-policy runs. */
      policy: string | null;
      reward: number | null;
      /** The reward was emitted for this call's policy only (`agl.reward.policy`). */
      rewardPolicy: string | null;
      choiceIndex: number | null;
      /** The items of the same call (its choices), rewarded together. */
      siblings: Item[];
      modelVersion: number | string | null;
      /** The oldest version of any token when the call was resumed on newer weights, else null. */
      modelVersionStart: number | string | null;
    }
    const items: Item[] = [];
    const byResponseId = new Map<string, Item>();
    let sawLlmSpan = false;
    for (const span of ordered) {
      const reward = rewardOf(span);
      if (reward !== null) {
        // A reward for one policy goes to that policy's most recent unrewarded call.
        const scoped = attrs(span)["agl.reward.policy"];
        const forPolicy = typeof scoped === "string" && scoped.length > 0 ? scoped : null;
        let target: Item | null = null;
        for (let i = items.length - 1; i >= 0; i--) {
          const item = items[i]!;
          if (
            item.reward === null &&
            item.seq < span.sequence_id &&
            (forPolicy === null || item.policy === forPolicy)
          ) {
            target = item;
            break;
          }
        }
        if (target)
          for (const item of target.siblings) {
            item.reward = reward;
            item.rewardPolicy = forPolicy;
          }
        else {
          const earlier = items.filter((i) => i.seq < span.sequence_id);
          diagnostics.add(
            "reward_unmatched",
            "warning",
            `reward ${reward} (sequence ${span.sequence_id}) matched no call: ${
              earlier.length === 0
                ? "no call has a smaller sequence id (a call with an equal sequence id is never eligible)"
                : "every earlier call already has a reward"
            }`,
            {
              spanId: span.span_id,
              spanName: span.name,
              details: { value: reward, sequenceId: span.sequence_id },
            },
          );
        }
        continue;
      }
      const call = this.readProxyCall(span, diagnostics);
      if (call === undefined) continue;
      sawLlmSpan = true;
      if (call === null) continue;
      const existing = call.responseId ? byResponseId.get(call.responseId) : undefined;
      if (existing) {
        diagnostics.add(
          "duplicate_response_id",
          "info",
          `response id ${call.responseId} seen again in "${span.name}"; kept the first`,
          {
            spanId: span.span_id,
            spanName: span.name,
          },
        );
        continue;
      }
      const siblings: Item[] = [];
      const routed = attrs(span)["agl.proxy.policy"];
      const policy = typeof routed === "string" && routed.length > 0 ? routed : null;
      for (const [choiceIndex, choiceCall] of choicesOf(call, span)) {
        siblings.push({
          call: choiceCall,
          seq: span.sequence_id,
          policy,
          reward: null,
          rewardPolicy: null,
          choiceIndex,
          siblings,
          modelVersion: modelVersionOf(span),
          modelVersionStart: modelVersionOf(span, "agl.proxy.model_version_start"),
        });
      }
      items.push(...siblings);
      if (call.responseId) byResponseId.set(call.responseId, siblings[0]!);
    }
    if (!sawLlmSpan) {
      const names = [...new Set(spans.map((s) => s.name))];
      diagnostics.add(
        "no_llm_span_matched",
        "error",
        `no proxy LLM span found (expected openai.chat.completion / openai.completion with token ids, or raw_gen_ai_request); span names seen: ${names.join(", ") || "(none)"}`,
        { details: { spanNames: names } },
      );
    }
    const output = items.map(
      ({ call, reward, choiceIndex, modelVersion, modelVersionStart, policy, rewardPolicy }) => ({
        prompt: { token_ids: call.promptTokenIds!, raw_content: call.input, image_urls: call.imageUrls },
        response: { token_ids: call.responseTokenIds!, raw_content: call.output, logprobs: call.logprobs },
        reward,
        metadata: {
          response_id: call.responseId,
          request: call.request,
          response: call.response,
          model: call.model,
          // The policy version that served the call (asynchronous training weighs stale calls by it).
          model_version: modelVersion,
          // Partial rollouts: tokens from `model_version_start` on were produced by versions up to `model_version`.
          ...(modelVersionStart === null ? {} : { model_version_start: modelVersionStart }),
          ...(choiceIndex === null ? {} : { choice_index: choiceIndex }),
          ...(policy === null ? {} : { policy }),
          ...(rewardPolicy === null ? {} : { reward_policy: rewardPolicy }),
        },
      }),
    );
    return { output, diagnostics: diagnostics.report() };
  }

  /** undefined: not an LLM span at all; null: an LLM span that cannot be used (diagnosed). */
  private readProxyCall(span: Span, diagnostics: DiagnosticsCollector): LlmCall | null | undefined {
    const isLiteLLM = span.name === "raw_gen_ai_request" || span.name === "litellm_request";
    const isOurs = /^openai\.(chat\.)?completion$/.test(span.name);
    if (!isLiteLLM && !isOurs) return undefined;
    const a = attrs(span);
    if (!this.options.keepFailedCalls && a["agl.proxy.status"] === "error") {
      diagnostics.add(
        "proxy_span_without_token_ids",
        "warning",
        `call in "${span.name}" failed upstream (${a["agl.proxy.error"] ?? `HTTP ${a["agl.proxy.http_status"]}`}); skipped`,
        {
          spanId: span.span_id,
          spanName: span.name,
        },
      );
      return null;
    }
    const call = readLlmCall(span);
    if (!call?.promptTokenIds?.length || !call.responseTokenIds?.length) {
      // litellm_request spans without the client keys are expected: raw_gen_ai_request carries the ids
      if (span.name === "litellm_request" && !call?.promptTokenIds && !call?.responseTokenIds)
        return undefined;
      diagnostics.add(
        "proxy_span_without_token_ids",
        "warning",
        `proxy span "${span.name}" (sequence ${span.sequence_id}) has empty ${!call?.promptTokenIds?.length ? "prompt" : "response"} token ids; the upstream did not return them (vLLM needs return_token_ids)`,
        { spanId: span.span_id, spanName: span.name },
      );
      return null;
    }
    return call;
  }
}

/**
 * The calls of one span, one per choice: `[[null, call]]` unless the span has our proxy's per-choice keys
 * for more than one choice (`n > 1`), then `[[i, call of choice i]]` for each choice with token ids.
 * Choice 0 is what the v0.3 keys (`response_token_ids`, `agl.response_logprobs`) already hold.
 */
function choicesOf(call: LlmCall, span: Span): Array<[number | null, LlmCall]> {
  const a = attrs(span);
  if (asTokenIds(a["agl.choices.1.token_ids"]) === null) return [[null, call]];
  const out: Array<[number | null, LlmCall]> = [];
  for (let i = 0; ; i++) {
    const key = `agl.choices.${i}.token_ids`;
    if (!(key in a)) break;
    const ids = asTokenIds(a[key]);
    if (!ids?.length) continue;
    const message = call.output[i];
    out.push([
      i,
      {
        ...call,
        responseTokenIds: ids,
        logprobs: logprobNumbers(a[`agl.choices.${i}.logprobs`]),
        output: message ? [message] : [],
      },
    ]);
  }
  return out.length ? out : [[null, call]];
}

/** `agl.proxy.model_version` of a span: the policy version that served the call, null when unknown. */
function modelVersionOf(span: Span, key = "agl.proxy.model_version"): number | string | null {
  const v = attrs(span)[key];
  return typeof v === "number" || typeof v === "string" ? v : null;
}
