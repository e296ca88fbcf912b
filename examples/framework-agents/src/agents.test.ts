/**
 * The real frameworks, unmodified at their defaults, through the proxy against the vLLM-like mock: every
 * LLM call each agent makes must become a span carrying the engine's exact token ids.
 */
import { mockDecode, mockEncode } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runAiSdkAnthropic } from "./ai-sdk-anthropic.js";
import { runAiSdkResponses } from "./ai-sdk-responses.js";
import { runLangChainResponses } from "./langchain-responses.js";
import { type ExampleSetup, startExample } from "./model.js";
import { runOpenAIAgents } from "./openai-agents.js";

const frameworks = [
  {
    name: "@openai/agents (Responses API)",
    api: "responses",
    run: (base: string) => runOpenAIAgents(`${base}/v1`),
  },
  {
    name: "ai + openai(model) (Responses API)",
    api: "responses",
    run: (base: string) => runAiSdkResponses(`${base}/v1`),
  },
  {
    name: "ai + @ai-sdk/anthropic (Messages API)",
    api: "messages",
    run: (base: string) => runAiSdkAnthropic(`${base}/v1`),
  },
  {
    name: "LangChain ChatOpenAI useResponsesApi",
    api: "responses",
    run: (base: string) => runLangChainResponses(`${base}/v1`),
  },
];

describe("real agent frameworks through the proxy", () => {
  let ex: ExampleSetup;
  beforeAll(async () => {
    ex = await startExample();
  });
  afterAll(() => ex.close());

  for (const f of frameworks) {
    it(`${f.name}: tool round trips and a streamed turn, every call a span with exact ids`, async () => {
      const { rolloutId, base } = await ex.attempt();
      const before = ex.mock.requests.length;
      const answers = await f.run(base);
      expect(answers).toEqual(["The sum is 42.", "The sum is 123."]);
      const calls = ex.mock.requests.slice(before).filter((r) => r.path.endsWith("/chat/completions"));
      // two LLM calls per turn (tool call, then answer)
      expect(calls).toHaveLength(4);
      expect(calls.some((c) => c.body.stream === true)).toBe(true);
      await ex.proxy.flush();
      const spans = (await ex.store.querySpans(rolloutId)).items.sort(
        (a, b) => a.sequence_id - b.sequence_id,
      );
      expect(spans).toHaveLength(calls.length);
      spans.forEach((span, i) => {
        const a = span.attributes as Record<string, any>;
        expect(a["agl.proxy.status"]).toBe("ok");
        expect(a["agl.proxy.client_api"]).toBe(f.api);
        expect(a["agl.proxy.stream"]).toBe(calls[i]!.body.stream === true);
        // the mock's tokenizer encodes the exact chat messages it was sent
        expect(a.prompt_token_ids).toEqual(mockEncode(JSON.stringify(calls[i]!.body.messages)));
        expect(a["agl.response_logprobs"]).toHaveLength(a.response_token_ids.length);
      });
      expect(mockDecode(spans[1]!.attributes.response_token_ids as number[])).toBe("The sum is 42.");
      expect(mockDecode(spans[3]!.attributes.response_token_ids as number[])).toBe("The sum is 123.");
      expect(mockDecode(spans[0]!.attributes.response_token_ids as number[])).toContain('"name":"add"');
    });
  }
});

describe("the same agents directly against the mock engine's own /v1/responses and /v1/messages", () => {
  let ex: ExampleSetup;
  beforeAll(async () => {
    ex = await startExample();
  });
  afterAll(() => ex.close());

  for (const f of frameworks) {
    it(`${f.name}: same answers without the proxy (the mock speaks the API as vLLM does)`, async () => {
      const before = ex.mock.requests.length;
      expect(await f.run(ex.mock.url)).toEqual(["The sum is 42.", "The sum is 123."]);
      const paths = ex.mock.requests.slice(before).map((r) => r.path);
      expect(paths.every((p) => p.endsWith(`/v1/${f.api}`))).toBe(true);
      expect(paths).toHaveLength(4);
    });
  }
});
