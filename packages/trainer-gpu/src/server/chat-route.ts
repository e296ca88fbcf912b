import { InvalidArgumentError } from "@agl/core";
import type { Context } from "hono";
import type { TokenEvent } from "../generate/request.js";
import type { ChatMessage, ToolDefinition } from "../tokenizer/messages.js";
import { TOOL_CALL_OPEN } from "../tokenizer/tool-calls.js";
import { assistantMessage, chatLogprobs } from "./format.js";
import { newId, nowSec, type RouteContext, setVersionHeaders } from "./route-context.js";
import { ChatCompletionRequestSchema, HttpError } from "./schemas.js";
import { fingerprintOf, streamChunks, usageOf } from "./sse.js";
import { forcedToolCalls, forcedToolNames } from "./tool-choice.js";

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
  const tools = (body.tools ?? null) as ToolDefinition[] | null;
  const forcedNames = forcedToolNames(body.tool_choice, tools);
  const forced = forcedNames
    ? forcedToolCalls(r.template, body.messages as ChatMessage[], tools ?? [], promptIds, forcedNames)
    : null;
  const parseTools = (tools?.length ?? 0) > 0 && body.tool_choice !== "none";
  const topK = body.logprobs ? (body.top_logprobs ?? 0) : 0;
  const { signal, timedOut } = r.signal(c);
  const base = {
    ...r.genParams(body, promptIds.length, body.max_completion_tokens ?? body.max_tokens),
    promptIds,
    signal,
    ...(body.served.adapter !== undefined ? { adapter: body.served.adapter } : {}),
    topLogprobs: topK,
    ...(forced ? { prefixChoices: forced.map((f) => f.ids) } : {}),
  };
  const n = body.n ?? 1;
  const id = newId("chatcmpl");
  const created = nowSec();
  const withIds = body.return_token_ids === true;

  if (!body.stream) {
    const results = await r.generator.generateMany(r.requests(n, base, body.seed));
    if (timedOut()) throw new HttpError(504, "Generation timed out", null, "timeout");
    const version = setVersionHeaders(c, results, r.version);
    const choices = results.map((result, index) => {
      const { message, finishReason } = assistantMessage(result, parseTools, r.template, forced);
      return {
        index,
        message,
        finish_reason: finishReason,
        logprobs: body.logprobs ? { content: chatLogprobs(r.tokenizer, result.tokens) } : null,
        ...(withIds ? { token_ids: result.tokenIds } : {}),
      };
    });
    return c.json({
      id,
      object: "chat.completion",
      created,
      model: body.served.name,
      system_fingerprint: fingerprintOf(version),
      choices,
      usage: usageOf(promptIds.length, results),
      ...(withIds ? { prompt_token_ids: promptIds } : {}),
    });
  }

  // Text after the first tool-call marker is held until the end, when we know if it parses.
  const streamed = Array.from({ length: n }, () => ({ text: "", holding: false }));
  const started = new Array<boolean>(n).fill(false);
  return streamChunks(r, c, {
    id,
    object: "chat.completion.chunk",
    model: body.served.name,
    created,
    promptTokens: promptIds.length,
    includeUsage: body.stream_options?.include_usage === true,
    timedOut,
    generate: (sink) => {
      const onToken = (i: number, e: TokenEvent) => {
        if (!started[i]) {
          // The first event comes after admission, so the version is the one generating this request.
          started[i] = true;
          sink.stampVersion(e.modelVersion);
          const role = {
            index: i,
            delta: { role: "assistant", content: "" },
            logprobs: null,
            finish_reason: null,
          };
          sink.send(
            [role],
            withIds && !started.some((x, j) => x && j !== i) ? { prompt_token_ids: promptIds } : {},
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
        sink.send([choice]);
      };
      return r.generator.generateMany(r.requests(n, base, body.seed, onToken));
    },
    finish: (sink, results) =>
      results.forEach((result, i) => {
        const { message, finishReason } = assistantMessage(result, parseTools, r.template, forced);
        const s = streamed[i] as { text: string };
        const delta: Record<string, unknown> = {};
        const rest = (message.content ?? "").slice(s.text.length);
        if (rest) delta.content = rest;
        if (message.tool_calls) {
          delta.tool_calls = message.tool_calls.map((call, index) => ({ index, ...call }));
        }
        sink.send([{ index: i, delta, logprobs: null, finish_reason: finishReason }]);
      }),
  });
}
