/**
 * Fixtures recorded by scripts/generate-fixtures.ts from the REAL instrumentation libraries (OpenLLMetry
 * old and new semconv, OpenInference, Vercel AI SDK, Langfuse, and our own instrumentOpenAI; the Vercel SDK
 * and ours also streamed) running one two-turn tool-calling conversation against the mock vLLM server. Every family must normalise to the
 * same LLM calls as our tracer, and to the HTTP exchange the server actually saw. The user turn carries an
 * https image URL and a data URL, so each library's image encoding is exercised.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Span } from "@agl/core";
import { describe, expect, it } from "vitest";
import {
  fromOpenAIMessages,
  fromOpenAITools,
  imageUrlsOf,
  type LlmCall,
  normalizeFinishReason,
} from "./llm-call.js";
import { looksLikeLlmCall, readLlmCall } from "./readers/index.js";
import { TraceToMessages } from "./trace-to-messages.js";
import { TraceToTriplets } from "./trace-to-triplets.js";
import { TraceTree } from "./tree.js";

interface Fixture {
  family: string;
  versions: Record<string, string>;
  /** `response` is the JSON body, or for streamed calls the SSE events' payloads. */
  exchanges: Array<{ request: any; response: any; stream?: boolean }>;
  spans: Span[];
}

const load = (family: string): Fixture =>
  JSON.parse(
    readFileSync(fileURLToPath(new URL(`../test/fixtures/${family}.json`, import.meta.url)), "utf8"),
  );

/**
 * What each library does not record; the comparison blanks these out on both sides. Images are not
 * here: every library at the recorded versions keeps both image URLs (see the image test below, which
 * fails if a regenerated fixture loses one).
 */
const LOSSES: Record<
  string,
  { responseId?: true; toolCallIds?: true; inputToolCalls?: true; finishReason?: true }
> = {
  agl: {},
  "genai-new": {},
  // OpenLLMetry ≤ 0.22 writes no response id, drops tool-call ids and the assistant's earlier tool calls
  "genai-old": { responseId: true, toolCallIds: true, inputToolCalls: true },
  openinference: {},
  "vercel-ai": {},
  "vercel-ai-stream": {},
  "agl-stream": {},
  // observeOpenAI records neither the response id nor the finish reason
  langfuse: { responseId: true, finishReason: true },
};
const FAMILIES = Object.keys(LOSSES);

type Comparable = Pick<
  LlmCall,
  "responseId" | "model" | "input" | "output" | "tools" | "usage" | "finishReason"
>;

function comparable(call: Comparable, family: string): Comparable {
  const loss = LOSSES[family]!;
  const strip = (messages: LlmCall["input"], isInput: boolean) =>
    messages.map((m) => {
      const out = { ...m };
      if (loss.toolCallIds) {
        delete out.tool_call_id;
        if (out.tool_calls) out.tool_calls = out.tool_calls.map((c) => ({ ...c, id: null }));
      }
      if (isInput && loss.inputToolCalls) delete out.tool_calls;
      return out;
    });
  return {
    responseId: loss.responseId ? null : call.responseId,
    model: call.model,
    input: strip(call.input, true),
    output: strip(call.output, false),
    tools: call.tools,
    usage: call.usage,
    finishReason: loss.finishReason ? null : call.finishReason,
  };
}

/** Ground truth: the chat completion requests and responses the mock server exchanged. */
function fromWire(fixture: Fixture): Comparable[] {
  return fixture.exchanges.map(({ request, response: raw, stream }) => {
    const response = stream ? assemble(raw) : raw;
    return {
      responseId: response.id,
      model: response.model,
      input: fromOpenAIMessages(request.messages),
      output: fromOpenAIMessages(response.choices.map((c: any) => c.message)),
      tools: fromOpenAITools(request.tools),
      usage: { inputTokens: response.usage.prompt_tokens, outputTokens: response.usage.completion_tokens },
      finishReason: normalizeFinishReason(response.choices[0].finish_reason),
    };
  });
}

/** SSE chunks → the equivalent non-streamed response (content, tool calls, ids, logprobs, usage). */
function assemble(events: any[]): any {
  const message: any = { role: "assistant", content: null };
  let finish: string | null = null;
  const tokenIds: number[] = [];
  const logprobs: any[] = [];
  for (const e of events) {
    const choice = e.choices?.[0];
    if (!choice) continue;
    if (choice.delta?.content) message.content = (message.content ?? "") + choice.delta.content;
    for (const call of choice.delta?.tool_calls ?? []) {
      message.tool_calls ??= [];
      message.tool_calls[call.index] = { id: call.id, type: "function", function: call.function };
    }
    tokenIds.push(...(choice.token_ids ?? []));
    logprobs.push(...(choice.logprobs?.content ?? []));
    finish = choice.finish_reason ?? finish;
  }
  return {
    id: events[0].id,
    model: events[0].model,
    prompt_token_ids: events[0].prompt_token_ids,
    choices: [{ message, finish_reason: finish, token_ids: tokenIds, logprobs: { content: logprobs } }],
    usage: events.at(-1).usage,
  };
}

const callsOf = (fixture: Fixture) =>
  fixture.spans
    .filter(looksLikeLlmCall)
    .sort((a, b) => a.start_time! - b.start_time!)
    .map((s) => readLlmCall(s)!);

describe("real-library fixtures normalise to the same LLM calls", () => {
  const ours = callsOf(load("agl"));

  it.each(FAMILIES)("%s: equals the wire exchange and our tracer's calls", (family) => {
    const fixture = load(family);
    const calls = callsOf(fixture);
    expect(calls).toHaveLength(2);
    const got = calls.map((c) => comparable(c, family));
    expect(got).toEqual(fromWire(fixture).map((c) => comparable(c, family)));
    expect(got).toEqual(ours.map((c) => comparable(c, family)));
  });

  it("every family's second call carries the tool round trip (unless the library drops it)", () => {
    for (const family of FAMILIES) {
      const [, second] = callsOf(load(family));
      expect(
        second!.input.map((m) => m.role),
        family,
      ).toEqual(["system", "user", "assistant", "tool"]);
      expect(second!.output[0]!.content, family).toBe("The answer is 5.");
    }
  });

  it("token ids: our tracer and OpenInference (response body) carry the engine's ids; TraceToTriplets emits them", () => {
    for (const family of ["agl", "agl-stream", "openinference"]) {
      const fixture = load(family);
      const wire = fixture.exchanges.map((e) => (e.stream ? assemble(e.response) : e.response));
      const triplets = new TraceToTriplets().adapt(fixture.spans);
      expect(
        triplets.map((t) => t.prompt.token_ids),
        family,
      ).toEqual(wire.map((r) => r.prompt_token_ids));
      expect(
        triplets.map((t) => t.response.token_ids),
        family,
      ).toEqual(wire.map((r) => r.choices[0].token_ids));
      expect(
        triplets.map((t) => t.response.logprobs),
        family,
      ).toEqual(wire.map((r) => r.choices[0].logprobs.content.map((x: any) => x.logprob)));
    }
  });

  it("families without token ids get a diagnostic that names the library and the fix", () => {
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics(load("vercel-ai").spans);
    expect(output).toHaveLength(2);
    const missing = diagnostics.diagnostics.filter((d) => d.code === "missing_token_ids");
    expect(missing).toHaveLength(2);
    expect(missing[0]!.message).toMatch(/vercel-ai instrumentation never records token ids.*@agl\/proxy/);
  });

  it("Vercel spans nest doGenerate and the tool call under generateText; only doGenerate counts as a call", () => {
    const fixture = load("vercel-ai");
    const tree = TraceTree.fromSpans(fixture.spans);
    expect(tree.root.span.name).toBe("ai.generateText");
    expect(tree.root.children.map((c) => c.span.name)).toEqual([
      "ai.generateText.doGenerate",
      "ai.toolCall",
      "ai.generateText.doGenerate",
    ]);
    const analysis = new TraceToTriplets().analyze(fixture.spans);
    expect(analysis.calls.map((c) => c.node.span.name)).toEqual([
      "ai.generateText.doGenerate",
      "ai.generateText.doGenerate",
    ]);
  });

  it("TraceToMessages gives the same fine-tuning examples from every family that keeps tool-call ids", () => {
    const expected = new TraceToMessages().adapt(load("agl").spans);
    expect(expected.at(-1)!.messages.at(-1)).toEqual({ role: "assistant", content: "The answer is 5." });
    for (const family of [
      "genai-new",
      "openinference",
      "vercel-ai",
      "vercel-ai-stream",
      "langfuse",
      "agl-stream",
    ]) {
      const spans = load(family)
        .spans.slice()
        .sort((a, b) => a.start_time! - b.start_time!);
      expect(new TraceToMessages().adapt(spans), family).toEqual(expected);
    }
  });

  it("image URLs: every family yields the https and the data URL the wire carried, in each triplet", () => {
    for (const family of FAMILIES) {
      const fixture = load(family);
      const wire = fixture.exchanges.map((e) => imageUrlsOf(fromOpenAIMessages(e.request.messages)));
      // The conversation must really carry both encodings, or this test proves nothing.
      expect(
        wire[0]!.map((u) => u.slice(0, 11)),
        family,
      ).toEqual(["https://exa", "data:image/"]);
      expect(
        callsOf(fixture).map((c) => c.imageUrls),
        family,
      ).toEqual(wire);
      const triplets = new TraceToTriplets().adapt(fixture.spans);
      expect(
        triplets.map((t) => t.prompt.image_urls),
        family,
      ).toEqual(wire);
    }
  });

  /** Where each library put the images, so each reader's image path (not only the shared one) is covered. */
  const IMAGE_ENCODINGS: Record<string, (attributes: Record<string, unknown>) => unknown> = {
    // OTel GenAI ≥ 1.37: a `uri` part for the URL, a `blob` part (bare base64 + mime_type) for the data URL
    "genai-new": (a) =>
      JSON.parse(String(a["gen_ai.input.messages"]))[1].parts.map((p: any) => [p.type, p.modality ?? null]),
    // OpenInference: llm.input_messages.N.message.contents.M.message_content.{type,image.image.url}
    openinference: (a) =>
      [0, 1, 2].map((i) => a[`llm.input_messages.1.message.contents.${i}.message_content.type`]),
    // Vercel: LanguageModelV3 `file` parts; the URL keeps `image/*`, the data URL becomes bare base64
    "vercel-ai": (a) =>
      JSON.parse(String(a["ai.prompt.messages"]))[1].content.map((p: any) => [p.type, p.mediaType ?? null]),
    // Langfuse and OpenLLMetry ≤ 0.22 keep OpenAI's own `image_url` parts
    langfuse: (a) =>
      JSON.parse(String(a["langfuse.observation.input"])).messages[1].content.map((p: any) => p.type),
    "genai-old": (a) => JSON.parse(String(a["gen_ai.prompt.1.content"])).map((p: any) => p.type),
  };
  const ENCODED_AS: Record<string, unknown> = {
    "genai-new": [
      ["text", null],
      ["uri", "image"],
      ["blob", "image"],
    ],
    openinference: ["text", "image", "image"],
    "vercel-ai": [
      ["text", null],
      ["file", "image/*"],
      ["file", "image/png"],
    ],
    langfuse: ["text", "image_url", "image_url"],
    "genai-old": ["text", "image_url", "image_url"],
  };

  it.each(Object.keys(IMAGE_ENCODINGS))("%s records the images in its own encoding", (family) => {
    const span = load(family).spans.find(looksLikeLlmCall)!;
    expect(IMAGE_ENCODINGS[family]!(span.attributes as Record<string, unknown>)).toEqual(ENCODED_AS[family]);
  });
});
