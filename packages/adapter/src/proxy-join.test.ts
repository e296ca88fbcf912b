/**
 * peers.md §3.3: TypeScript tracers never see token ids, so a client span (here the real Vercel AI SDK's)
 * gets them from the @agl/proxy span of the same call, joined by response id. Everything is real: the
 * `ai` SDK with telemetry, the proxy, the store and the vLLM-like mock upstream.
 */

import { InMemoryLightningStore, spanFromReadable } from "@agl/core";
import { mockEncode, startMockLLMServer } from "@agl/core/mock-llm";
import { LLMProxy } from "@agl/proxy";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { generateText } from "ai";
import { expect, it } from "vitest";
import { mkSpan, rewardAttrs } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";

it("a Vercel AI SDK span borrows token ids and logprobs from the proxy span with the same response id", async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const mock = await startMockLLMServer();
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = new LLMProxy({
    store,
    backends: [{ url: mock.baseURL }],
    model: "policy",
    healthCheckIntervalMs: 0,
    retries: 0,
    logger: { warn() {}, error() {} },
  });
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const url = await proxy.start();
  try {
    const r = await store.startRollout({ input: {} });
    const rid = r.rollout_id;
    const aid = r.attempt.attempt_id;
    const model = createOpenAICompatible({
      name: "agl",
      baseURL: `${url}/rollout/${rid}/attempt/${aid}/v1`,
      apiKey: "x",
    });
    const { text, response } = await generateText({
      model: model.chatModel("anything"),
      prompt: "ping",
      experimental_telemetry: { isEnabled: true, tracer: provider.getTracer("ai") },
    });
    expect(text).toBe("Echo: ping");
    await proxy.flush();
    const clientSpans = exporter
      .getFinishedSpans()
      .map((s) => spanFromReadable(s, { rolloutId: rid, attemptId: aid, sequenceId: 0 }));
    const proxySpans = (await store.querySpans(rid)).items;
    const end = Math.max(...clientSpans.map((s) => s.end_time!));
    const reward = mkSpan({
      id: "reward",
      name: "agentlightning.annotation",
      start: end + 0.01,
      end: end + 0.01,
      attributes: rewardAttrs(1),
    });

    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics([
      ...clientSpans,
      ...proxySpans,
      reward,
    ]);
    expect(output).toHaveLength(1);
    const [t] = output;
    expect(t!.metadata).toMatchObject({ family: "vercel-ai", response_id: response.id });
    expect(t!.prompt.token_ids).toEqual(proxySpans[0]!.attributes.prompt_token_ids);
    expect(t!.response.token_ids).toEqual(mockEncode("Echo: ping"));
    expect(t!.response.logprobs).toHaveLength("Echo: ping".length);
    expect(t!.reward).toBe(1);
    expect(diagnostics.counts).toMatchObject({ token_ids_joined: 1, duplicate_response_id: 1 });
    expect(diagnostics.counts.missing_token_ids).toBeUndefined();
  } finally {
    await provider.shutdown();
    await proxy.stop();
    await mock.close();
    await store.close();
    context.disable();
  }
});
