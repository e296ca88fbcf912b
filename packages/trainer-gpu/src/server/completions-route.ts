import type { Context } from "hono";
import type { TokenEvent } from "../generate/request.js";
import { completionFinishReason, completionLogprobs } from "./format.js";
import { newId, nowSec, type RouteContext, setVersionHeaders } from "./route-context.js";
import { type CompletionRequest, CompletionRequestSchema, HttpError } from "./schemas.js";
import { fingerprintOf, streamChunks, usageOf } from "./sse.js";

/** `POST /v1/completions`: text or token-id prompts, vLLM's per-choice prompt/output ids. */
export async function completion(r: RouteContext, c: Context): Promise<Response> {
  const body = await r.body(c, CompletionRequestSchema);
  const promptIds = promptIdsOf(r, body);
  if (promptIds.length === 0) throw new HttpError(400, "The prompt is empty", "prompt", "invalid_value");
  r.checkPrompt(promptIds, "prompt");
  const { signal, timedOut } = r.signal(c);
  const wantLogprobs = body.logprobs != null;
  const base = {
    ...r.genParams(body, promptIds.length, body.max_tokens ?? 16),
    promptIds,
    signal,
    ...(body.served.adapter !== undefined ? { adapter: body.served.adapter } : {}),
    topLogprobs: body.logprobs ?? 0,
  };
  const n = body.n ?? 1;
  const id = newId("cmpl");
  const created = nowSec();
  const withIds = body.return_token_ids === true;

  if (!body.stream) {
    const results = await r.generator.generateMany(r.requests(n, base, body.seed));
    if (timedOut()) throw new HttpError(504, "Generation timed out", null, "timeout");
    const version = setVersionHeaders(c, results, r.version);
    const choices: Array<Record<string, unknown>> = results.map((result, index) => ({
      index,
      text: result.text,
      finish_reason: completionFinishReason(result),
      logprobs: wantLogprobs ? completionLogprobs(r.tokenizer, result.tokens) : null,
      ...(withIds ? { prompt_token_ids: promptIds, token_ids: result.tokenIds } : {}),
    }));
    return c.json({
      id,
      object: "text_completion",
      created,
      model: body.served.name,
      system_fingerprint: fingerprintOf(version),
      choices,
      usage: usageOf(promptIds.length, results),
    });
  }

  const first = new Array<boolean>(n).fill(true);
  const offsets = new Array<number>(n).fill(0);
  return streamChunks(r, c, {
    id,
    object: "text_completion",
    model: body.served.name,
    created,
    promptTokens: promptIds.length,
    includeUsage: body.stream_options?.include_usage === true,
    timedOut,
    generate: (sink) => {
      const onToken = (i: number, e: TokenEvent) => {
        if (first.every((f) => f)) sink.stampVersion(e.modelVersion);
        const choice: Record<string, unknown> = { index: i, text: e.textDelta, finish_reason: null };
        choice.logprobs =
          wantLogprobs && e.token ? completionLogprobs(r.tokenizer, [e.token], offsets[i]) : null;
        offsets[i] = (offsets[i] as number) + e.textDelta.length;
        if (withIds) {
          choice.token_ids = e.token ? [e.token.id] : [];
          if (first[i]) choice.prompt_token_ids = promptIds;
        }
        first[i] = false;
        sink.send([choice]);
      };
      return r.generator.generateMany(r.requests(n, base, body.seed, onToken));
    },
    finish: (sink, results) =>
      results.forEach((result, i) => {
        sink.send([{ index: i, text: "", logprobs: null, finish_reason: completionFinishReason(result) }]);
      }),
  });
}

function promptIdsOf(r: RouteContext, body: CompletionRequest): number[] {
  const p = body.prompt;
  const V = r.tokenizer.vocabSize;
  // vLLM's completions add the tokenizer's special tokens (e.g. a Llama bos) unless told not to.
  const options = { addSpecialTokens: body.add_special_tokens ?? true };
  if (typeof p === "string") return r.tokenizer.encode(p, options);
  const first = p[0];
  if (typeof first === "string") return r.tokenizer.encode(first, options);
  const ids = (Array.isArray(first) ? first : p) as number[];
  const bad = ids.findIndex((x) => x < 0 || x >= V);
  if (bad >= 0)
    throw new HttpError(
      400,
      `Token id ${ids[bad]} at prompt[${bad}] is outside the vocabulary [0, ${V})`,
      "prompt",
      "invalid_value",
    );
  return ids;
}
