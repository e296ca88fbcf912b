import OpenAI from "openai";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../logger.js";
import { type MockLLMServer, mockDecode, mockEncode, startMockLLMServer } from "../mock-llm/index.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import { LightningTracer } from "../tracing/tracer.js";
import type { Span } from "../types/span.js";
import { instrumentOpenAI } from "./openai.js";

let server: MockLLMServer;
let toolServer: MockLLMServer;
let store: InMemoryLightningStore;
const tracer = new LightningTracer({ logger: silentLogger });

beforeAll(async () => {
  server = await startMockLLMServer();
  toolServer = await startMockLLMServer({
    respond: (_req, i) => ({
      content: i === 0 ? null : "thinking",
      tool_calls: [{ id: `call_${i}`, name: "get_weather", arguments: '{"city":"Paris"}' }],
    }),
  });
});
afterAll(async () => {
  await server.close();
  await toolServer.close();
});
afterEach(async () => store?.close());

const client = (base: string) => instrumentOpenAI(new OpenAI({ baseURL: base, apiKey: "k", maxRetries: 0 }));

async function traced(fn: () => Promise<unknown>): Promise<{ spans: Span[]; value: any }> {
  store = new InMemoryLightningStore();
  const r = await store.startRollout({ input: 0 });
  const t = tracer.traceAttempt({ rolloutId: r.rollout_id, attemptId: r.attempt.attempt_id, store });
  const value = await t.run(fn);
  await t.flush();
  return { spans: (await store.querySpans(r.rollout_id)).items, value };
}

describe("instrumentOpenAI", () => {
  it("records a non-streamed chat completion with request, response, usage, token ids and logprobs", async () => {
    const openai = client(server.baseURL);
    const { spans, value } = await traced(() =>
      openai.chat.completions.create({
        model: "mock-model",
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "hi there" },
        ],
        temperature: 0.5,
        max_tokens: 32,
        top_p: 0.9,
        logprobs: true,
        // vLLM extension
        ...({ return_token_ids: true } as object),
      }),
    );
    expect(value.choices[0].message.content).toBe("Echo: hi there");
    expect(spans).toHaveLength(1);
    const a = spans[0]!.attributes;
    expect(spans[0]!.name).toBe("openai.chat.completion");
    expect(a).toMatchObject({
      "gen_ai.system": "openai",
      "llm.request.type": "chat",
      "gen_ai.request.model": "mock-model",
      "gen_ai.request.temperature": 0.5,
      "gen_ai.request.max_tokens": 32,
      "gen_ai.request.top_p": 0.9,
      "gen_ai.prompt.0.role": "system",
      "gen_ai.prompt.0.content": "be brief",
      "gen_ai.prompt.1.role": "user",
      "gen_ai.prompt.1.content": "hi there",
      "gen_ai.completion.0.role": "assistant",
      "gen_ai.completion.0.content": "Echo: hi there",
      "gen_ai.completion.0.finish_reason": "stop",
      "gen_ai.response.id": value.id,
      "gen_ai.response.model": "mock-model",
      "gen_ai.usage.prompt_tokens": value.usage.prompt_tokens,
      "gen_ai.usage.completion_tokens": value.usage.completion_tokens,
    });
    expect(mockDecode(a.response_token_ids as number[])).toBe("Echo: hi there");
    expect(a.prompt_token_ids).toEqual((value as any).prompt_token_ids);
    const logprobs = JSON.parse(a["logprobs.content"] as string);
    expect(logprobs).toHaveLength(mockEncode("Echo: hi there").length);
    expect(spans[0]!.status.status_code).toBe("OK");
  });

  it("records tools, tool calls and n > 1 choices", async () => {
    const openai = client(toolServer.baseURL);
    const { spans } = await traced(() =>
      openai.chat.completions.create({
        model: "mock-model",
        n: 2,
        messages: [
          { role: "user", content: "weather?" },
          {
            role: "assistant",
            content: null,
            tool_calls: [{ id: "c0", type: "function", function: { name: "get_weather", arguments: "{}" } }],
          },
          { role: "tool", tool_call_id: "c0", content: "sunny" },
        ],
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "weather",
              parameters: { type: "object", properties: {} },
            },
          },
        ],
      }),
    );
    const a = spans[0]!.attributes;
    expect(a).toMatchObject({
      "gen_ai.request.functions.0.name": "get_weather",
      "gen_ai.request.functions.0.description": "weather",
      "gen_ai.request.functions.0.parameters": '{"type":"object","properties":{}}',
      "gen_ai.prompt.1.tool_calls.0.id": "c0",
      "gen_ai.prompt.1.tool_calls.0.name": "get_weather",
      "gen_ai.prompt.2.role": "tool",
      "gen_ai.prompt.2.tool_call_id": "c0",
      "gen_ai.completion.0.finish_reason": "tool_calls",
      "gen_ai.completion.0.tool_calls.0.id": "call_0",
      "gen_ai.completion.0.tool_calls.0.name": "get_weather",
      "gen_ai.completion.0.tool_calls.0.arguments": '{"city":"Paris"}',
      "gen_ai.completion.1.content": "thinking",
      "gen_ai.completion.1.tool_calls.0.id": "call_1",
    });
    expect(a["gen_ai.completion.0.content"]).toBeUndefined();
  });

  it("records a streamed chat completion once the stream is consumed, assembling content, ids and logprobs", async () => {
    const openai = client(server.baseURL);
    const { spans, value } = await traced(async () => {
      const stream = await openai.chat.completions.create({
        model: "mock-model",
        stream: true,
        stream_options: { include_usage: true },
        logprobs: true,
        messages: [{ role: "user", content: "stream me please" }],
        ...({ return_token_ids: true } as object),
      });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
      return text;
    });
    expect(value).toBe("Echo: stream me please");
    const a = spans[0]!.attributes;
    expect(a["gen_ai.completion.0.content"]).toBe("Echo: stream me please");
    expect(a["gen_ai.completion.0.finish_reason"]).toBe("stop");
    expect(a["llm.is_streaming"]).toBe(true);
    expect(mockDecode(a.response_token_ids as number[])).toBe("Echo: stream me please");
    expect((a.prompt_token_ids as number[]).length).toBeGreaterThan(0);
    expect(JSON.parse(a["logprobs.content"] as string)).toHaveLength("Echo: stream me please".length);
    expect(a["gen_ai.usage.completion_tokens"]).toBe("Echo: stream me please".length);
  });

  it("streams tool calls and ends the span when the consumer breaks out early", async () => {
    const openai = client(toolServer.baseURL);
    const { spans } = await traced(async () => {
      const stream = await openai.chat.completions.create({
        model: "mock-model",
        stream: true,
        messages: [{ role: "user", content: "weather?" }],
      });
      for await (const chunk of stream) if (chunk.choices[0]?.delta?.tool_calls) break;
    });
    expect(spans).toHaveLength(1);
    const a = spans[0]!.attributes;
    expect(a["gen_ai.completion.0.tool_calls.0.name"]).toBe("get_weather");
    expect(a["gen_ai.completion.0.tool_calls.0.arguments"]).toBe('{"city":"Paris"}');
    expect(a["llm.stream.aborted"]).toBe(true);
    expect(spans[0]!.end_time).not.toBeNull();
  });

  it("records text completions (streamed too) with vLLM per-choice prompt ids", async () => {
    const openai = client(server.baseURL);
    const { spans } = await traced(async () => {
      await openai.completions.create({
        model: "mock-model",
        prompt: "abc",
        logprobs: 1,
        ...({ return_token_ids: true } as object),
      });
      const stream = await openai.completions.create({
        model: "mock-model",
        prompt: "xyz",
        stream: true,
        ...({ return_token_ids: true } as object),
      });
      for await (const _ of stream);
    });
    expect(spans).toHaveLength(2);
    const [full, streamed] = spans.map((s) => s.attributes);
    expect(full).toMatchObject({ "llm.request.type": "completion", "gen_ai.prompt.0.content": "abc" });
    expect(mockDecode(full!.prompt_token_ids as number[])).toBe("abc");
    expect(mockDecode(full!.response_token_ids as number[])).toBe(full!["gen_ai.completion.0.content"]);
    expect(JSON.parse(full!["logprobs.content"] as string)[0]).toHaveProperty("logprob");
    expect(mockDecode(streamed!.prompt_token_ids as number[])).toBe("xyz");
    expect(mockDecode(streamed!.response_token_ids as number[])).toBe(
      streamed!["gen_ai.completion.0.content"],
    );
  });

  it("records HTTP errors as status ERROR and rethrows; withResponse still works", async () => {
    const failing = await startMockLLMServer({ failFirst: 1 });
    try {
      const openai = client(failing.baseURL);
      const { spans } = await traced(async () => {
        await expect(
          openai.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] }),
        ).rejects.toThrow();
        const { data, response } = await openai.chat.completions
          .create({ model: "m", messages: [{ role: "user", content: "y" }] })
          .withResponse();
        expect(response.status).toBe(200);
        expect(data.choices[0]!.message.content).toBe("Echo: y");
      });
      expect(spans).toHaveLength(2);
      expect(spans[0]!.status.status_code).toBe("ERROR");
      expect(spans[0]!.attributes["http.response.status_code"]).toBe(500);
      expect(spans[1]!.status.status_code).toBe("OK");
    } finally {
      await failing.close();
    }
  });

  it("records the SDK's chat.completions.stream() helper and an aborted stream", async () => {
    const slow = await startMockLLMServer({ chunkDelayMs: 15 });
    try {
      const openai = client(slow.baseURL);
      const { spans } = await traced(async () => {
        const helper = openai.chat.completions.stream({
          model: "m",
          messages: [{ role: "user", content: "via helper" }],
        });
        const final = await helper.finalChatCompletion();
        expect(final.choices[0]!.message.content).toBe("Echo: via helper");
        const stream = await openai.chat.completions.create({
          model: "m",
          stream: true,
          messages: [{ role: "user", content: "a long reply that we will abort" }],
        });
        let chunks = 0;
        for await (const _ of stream) {
          if (++chunks === 3) stream.controller.abort();
        }
      });
      expect(spans).toHaveLength(2);
      expect(spans[0]!.attributes["gen_ai.completion.0.content"]).toBe("Echo: via helper");
      const aborted = spans[1]!.attributes;
      expect(aborted["llm.stream.aborted"]).toBe(true);
      const partial = String(aborted["gen_ai.completion.0.content"]);
      expect("Echo: a long reply that we will abort".startsWith(partial)).toBe(true);
      expect(partial.length).toBeLessThan("Echo: a long reply that we will abort".length);
    } finally {
      await slow.close();
    }
  });

  it("rejects something that is not an openai client", () => {
    expect(() => instrumentOpenAI({} as any)).toThrow(/client\.chat\.completions\.create/);
  });

  it("is idempotent", () => {
    const openai = new OpenAI({ baseURL: server.baseURL, apiKey: "k" });
    const once = instrumentOpenAI(openai).chat.completions.create;
    expect(instrumentOpenAI(openai).chat.completions.create).toBe(once);
  });
});
