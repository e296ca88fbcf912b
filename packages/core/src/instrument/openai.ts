import { type Span as OtelSpan, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { InvalidArgumentError } from "../errors.js";
import { currentFrame } from "../tracing/context.js";
import { SPAN_NAMES } from "../tracing/conventions.js";
import { defaultTracer, type LightningTracer } from "../tracing/tracer.js";
import { type CallKind, requestAttributes, responseAttributes } from "./openai-attributes.js";
import { StreamAccumulator } from "./openai-stream.js";

export interface InstrumentOpenAIOptions {
  /** Tracer for the spans; default: the one tracing the current rollout. */
  tracer?: LightningTracer;
  /** Record prompt and completion text (default true; training needs it). */
  captureContent?: boolean;
}

/** The parts of an `openai` client we patch; structural, so `openai` stays an optional peer dependency. */
export interface OpenAILike {
  chat: { completions: { create: (...args: any[]) => any } };
  completions?: { create: (...args: any[]) => any };
}

const INSTRUMENTED = Symbol.for("agl.instrument.openai");

/**
 * Record every `chat.completions.create` and `completions.create` of this `openai` client (v5/v6) as an
 * `openai.chat.completion` span (`llm.request.type` = chat | completion) with gen_ai.* request and
 * response attributes and, when the server returns them (vLLM `return_token_ids`), `prompt_token_ids`,
 * `response_token_ids` and `logprobs.content`. Streams are recorded too: the span ends when the stream
 * is fully read, broken out of, or aborted. The client is patched in place and returned; patching twice
 * is a no-op. The call's result keeps the SDK's own type (`withResponse()` etc. still work).
 */
export function instrumentOpenAI<C extends OpenAILike>(client: C, options: InstrumentOpenAIOptions = {}): C {
  if (typeof (client as Partial<OpenAILike>)?.chat?.completions?.create !== "function") {
    throw new InvalidArgumentError("client.chat.completions.create", "must be an openai client (v5 or v6)");
  }
  const flagged = client as unknown as Record<symbol, boolean>;
  if (flagged[INSTRUMENTED]) return client;
  patch(client.chat.completions, "chat", options);
  if (client.completions && typeof client.completions.create === "function") {
    patch(client.completions, "completion", options);
  }
  Object.defineProperty(client, INSTRUMENTED, { value: true });
  return client;
}

function patch(
  target: { create: (...args: any[]) => any },
  kind: CallKind,
  options: InstrumentOpenAIOptions,
): void {
  const original = target.create.bind(target);
  const capture = options.captureContent ?? true;
  target.create = function instrumentedCreate(body: any, requestOptions?: unknown) {
    const tracer = options.tracer ?? currentFrame()?.trace.tracer ?? defaultTracer();
    const span = tracer.startSpan(SPAN_NAMES.openaiChat, {
      kind: SpanKind.CLIENT,
      attributes: requestAttributes(body, kind, capture),
    });
    let result: any;
    try {
      result = original(body, requestOptions);
    } catch (error) {
      endWithError(span, error);
      throw error;
    }
    const onValue = (data: any) => {
      if (body?.stream === true && data && typeof data === "object" && typeof data.iterator === "function") {
        observeStream(data, span, kind, capture);
      } else {
        span.setAttributes(responseAttributes(data, kind, capture));
        span.setStatus({ code: SpanStatusCode.OK });
        span.end();
      }
      return data;
    };
    // The SDK's own transform keeps the returned value an APIPromise (withResponse, asResponse).
    if (result && typeof result._thenUnwrap === "function") {
      const wrapped = result._thenUnwrap(onValue);
      wrapped.then(undefined, (error: unknown) => endWithError(span, error));
      return wrapped;
    }
    return Promise.resolve(result).then(onValue, (error) => {
      endWithError(span, error);
      throw error;
    });
  };
}

function endWithError(span: OtelSpan, error: unknown): void {
  if (!span.isRecording()) return;
  const err = error instanceof Error ? error : new Error(String(error));
  span.recordException(err);
  const status = (error as { status?: unknown })?.status;
  if (typeof status === "number") span.setAttribute("http.response.status_code", status);
  span.setAttribute("error.type", err.name || "Error");
  span.setStatus({ code: SpanStatusCode.ERROR, message: err.message });
  span.end();
}

/**
 * Replace the SDK Stream's iterator factory (used by for-await, `tee()` and `toReadableStream()`) with
 * one that sees every chunk on its way to the caller.
 */
function observeStream(stream: any, span: OtelSpan, kind: CallKind, capture: boolean): void {
  const acc = new StreamAccumulator(kind);
  const source: () => AsyncIterator<unknown> = stream.iterator;
  let finished = false;
  const finish = (error?: unknown, aborted = false) => {
    if (finished) return;
    finished = true;
    span.setAttributes(responseAttributes(acc.toResponse(), kind, capture));
    if (aborted) span.setAttribute("llm.stream.aborted", true);
    if (error !== undefined) return endWithError(span, error);
    span.setStatus({ code: SpanStatusCode.OK });
    span.end();
  };
  stream.iterator = async function* observed() {
    const it = source();
    try {
      while (true) {
        const next = await it.next();
        if (next.done) break;
        acc.add(next.value);
        yield next.value;
      }
      finish(undefined, stream.controller?.signal?.aborted === true);
    } catch (error) {
      finish(error);
      throw error;
    } finally {
      // Reached when the consumer breaks out early: close the HTTP stream and record what was read.
      if (!finished) {
        await it.return?.();
        finish(undefined, true);
      }
    }
  };
  stream.controller?.signal?.addEventListener("abort", () => finish(undefined, true), { once: true });
}
