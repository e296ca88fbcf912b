import { InvalidArgumentError } from "@agl/core";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import type { TokenEvent } from "../generate/generator.js";
import { TOOL_CALL_OPEN } from "../tokenizer/tool-calls.js";
import { assistantMessage, chatLogprobs } from "./format.js";
import { newId, nowSec, type RouteContext, SseQueue } from "./route-context.js";
import { ChatCompletionRequestSchema, HttpError } from "./schemas.js";

/** `POST /v1/chat/completions`: OpenAI chat with vLLM's token-id and logprob extensions. */
export async function chatCompletion(r: RouteContext, c: Context): Promise<Response> {
  const body = await r.body(c, ChatCompletionRequestSchema);
  let encoded: { ids: number[] };
  try {
    encoded = r.template.encodeChat(body.messages as never, (body.tools ?? undefined) as never);
  } catch (error) {
    if (InvalidArgumentError.isInstance(error))
      throw new HttpError(400, error.message, error.field, "invalid_value");
    throw error;
  }
  const promptIds = encoded.ids;
  r.checkPrompt(promptIds, "messages");
  const parseTools = (body.tools?.length ?? 0) > 0 && body.tool_choice !== "none";
  const topK = body.logprobs ? (body.top_logprobs ?? 0) : 0;
  const { signal, timedOut } = r.signal(c);
  const base = {
    ...r.genParams(body, promptIds.length, body.max_completion_tokens ?? body.max_tokens),
    promptIds,
    signal,
    topLogprobs: topK,
  };
  const n = body.n ?? 1;
  const id = newId("chatcmpl");
  const created = nowSec();
  const withIds = body.return_token_ids === true;

  if (!body.stream) {
    const results = await r.generator.generateMany(r.requests(n, base, body.seed));
    if (timedOut()) throw new HttpError(504, "Generation timed out", null, "timeout");
    c.header("x-agl-model-version", String(results[0]?.modelVersion ?? r.version));
    const choices = results.map((result, index) => {
      const { message, finishReason } = assistantMessage(result, parseTools);
      return {
        index,
        message,
        finish_reason: finishReason,
        logprobs: body.logprobs ? { content: chatLogprobs(r.tokenizer, result.tokens) } : null,
        ...(withIds ? { token_ids: result.tokenIds } : {}),
      };
    });
    const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
    return c.json({
      id,
      object: "chat.completion",
      created,
      model: r.modelName,
      system_fingerprint: `agl-policy-v${results[0]?.modelVersion ?? r.version}`,
      choices,
      usage: {
        prompt_tokens: promptIds.length,
        completion_tokens: completion,
        total_tokens: promptIds.length + completion,
      },
      ...(withIds ? { prompt_token_ids: promptIds } : {}),
    });
  }

  return streamSSE(c, async (stream) => {
    let fingerprint = `agl-policy-v${r.version}`;
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
      id,
      object: "chat.completion.chunk",
      created,
      model: r.modelName,
      system_fingerprint: fingerprint,
      choices,
      ...extra,
    });
    const sse = new SseQueue();
    const push = (x: unknown) => sse.push(x);
    // Text after the first tool-call marker is held until the end, when we know if it parses.
    const streamed = Array.from({ length: n }, () => ({ text: "", holding: false }));
    const started = new Array<boolean>(n).fill(false);
    const onToken = (i: number, e: TokenEvent) => {
      if (!started[i]) {
        // The first event comes after admission, so the version is the one generating this request.
        started[i] = true;
        fingerprint = `agl-policy-v${r.version}`;
        const role = {
          index: i,
          delta: { role: "assistant", content: "" },
          logprobs: null,
          finish_reason: null,
        };
        push(
          chunk(
            [role],
            withIds && !started.some((x, j) => x && j !== i) ? { prompt_token_ids: promptIds } : {},
          ),
        );
      }
      const s = streamed[i] as { text: string; holding: boolean };
      let content = "";
      if (!s.holding) {
        const at = parseTools ? e.textDelta.indexOf(TOOL_CALL_OPEN) : -1;
        content = at >= 0 ? e.textDelta.slice(0, at) : e.textDelta;
        if (at >= 0) s.holding = true;
        s.text += content;
      }
      if (!e.token && content === "") return;
      const choice: Record<string, unknown> = {
        index: i,
        delta: content ? { content } : {},
        finish_reason: null,
      };
      choice.logprobs = body.logprobs && e.token ? { content: chatLogprobs(r.tokenizer, [e.token]) } : null;
      if (withIds) choice.token_ids = e.token ? [e.token.id] : [];
      push(chunk([choice]));
    };
    const finished = r.generator.generateMany(r.requests(n, base, body.seed, onToken)).then(
      (results) => {
        results.forEach((result, i) => {
          const { message, finishReason } = assistantMessage(result, parseTools);
          const s = streamed[i] as { text: string };
          const delta: Record<string, unknown> = {};
          const rest = (message.content ?? "").slice(s.text.length);
          if (rest) delta.content = rest;
          if (message.tool_calls) {
            delta.tool_calls = message.tool_calls.map((call, index) => ({ index, ...call }));
          }
          push(chunk([{ index: i, delta, logprobs: null, finish_reason: finishReason }]));
        });
        if (body.stream_options?.include_usage) {
          const completion = results.reduce((a, r) => a + r.tokenIds.length, 0);
          push(
            chunk([], {
              usage: {
                prompt_tokens: promptIds.length,
                completion_tokens: completion,
                total_tokens: promptIds.length + completion,
              },
            }),
          );
        }
      },
      (error) =>
        push({
          error: { message: error instanceof Error ? error.message : String(error), type: "server_error" },
        }),
    );
    void finished.finally(() => sse.finish());
    await sse.pump(stream);
  });
}
