/**
 * The proxy's span format (packages/proxy/README.md) read back by the adapter's ProxySpansToTriplets:
 * what the engine sent must come out as the triplets' token ids, for plain, streamed and failed calls.
 */

import { ProxySpansToTriplets } from "@agl/adapter";
import { InMemoryLightningStore, newSpanId, newTraceId } from "@agl/core";
import { mockEncode, startMockLLMServer } from "@agl/core/mock-llm";
import OpenAI from "openai";
import { expect, it } from "vitest";
import { quietProxy } from "../support/quiet-proxy.js";

it("ProxySpansToTriplets reads the proxy's spans: exact ids, logprobs, rewards by sequence", async () => {
  const mock = await startMockLLMServer({ failFirst: 0 });
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = quietProxy(store, mock.baseURL);
  const url = await proxy.start();
  try {
    const r = await store.startRollout({ input: {} });
    const rid = r.rollout_id;
    const aid = r.attempt.attempt_id;
    const client = new OpenAI({
      baseURL: `${url}/rollout/${rid}/attempt/${aid}/v1`,
      apiKey: "x",
      maxRetries: 0,
    });
    const first = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "one" }],
    });
    for await (const _ of await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "two" }],
      stream: true,
    }));
    await proxy.flush();
    // the agent's reward, after both calls
    const seq = await store.getNextSpanSequenceId(rid, aid);
    await store.addSpan({
      rollout_id: rid,
      attempt_id: aid,
      sequence_id: seq,
      trace_id: newTraceId(),
      span_id: newSpanId(),
      name: "agentlightning.annotation",
      attributes: { "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 0.75 },
    });
    const spans = (await store.querySpans(rid)).items;
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics(spans);
    expect(output).toHaveLength(2);
    expect(output[0]!.prompt.token_ids).toEqual((first as any).prompt_token_ids);
    expect(output[0]!.response.token_ids).toEqual(mockEncode("Echo: one"));
    expect(output[1]!.response.token_ids).toEqual(mockEncode("Echo: two"));
    expect(output[1]!.response.logprobs).toHaveLength("Echo: two".length);
    expect(output.map((t) => t.reward)).toEqual([null, 0.75]);
    expect(diagnostics.diagnostics.filter((d) => d.severity !== "info")).toEqual([]);
  } finally {
    await proxy.stop();
    await mock.close();
    await store.close();
  }
});

it("a call with n = 2 gives one triplet per choice, each with its own ids and logprobs, sharing the reward", async () => {
  const mock = await startMockLLMServer({ respond: (_req, i) => ({ content: `choice ${i}!` }) });
  const store = new InMemoryLightningStore({ watchdog: false });
  const proxy = quietProxy(store, mock.baseURL);
  const url = await proxy.start();
  try {
    const r = await store.startRollout({ input: {} });
    const rid = r.rollout_id;
    const aid = r.attempt.attempt_id;
    const client = new OpenAI({
      baseURL: `${url}/rollout/${rid}/attempt/${aid}/v1`,
      apiKey: "x",
      maxRetries: 0,
    });
    const answer = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "pick" }],
      n: 2,
    });
    await proxy.flush();
    await store.addSpan({
      rollout_id: rid,
      attempt_id: aid,
      sequence_id: await store.getNextSpanSequenceId(rid, aid),
      trace_id: newTraceId(),
      span_id: newSpanId(),
      name: "agentlightning.annotation",
      attributes: { "agentlightning.reward.0.name": "primary", "agentlightning.reward.0.value": 1 },
    });
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics(
      (await store.querySpans(rid)).items,
    );
    expect(output).toHaveLength(2);
    for (const [i, t] of output.entries()) {
      expect(t.prompt.token_ids).toEqual((answer as any).prompt_token_ids);
      expect(t.response.token_ids).toEqual((answer.choices[i] as any).token_ids);
      expect(t.response.token_ids).toEqual(mockEncode(`choice ${i}!`));
      expect(t.response.logprobs).toEqual(answer.choices[i]!.logprobs!.content!.map((x) => x.logprob));
      expect(t.response.raw_content).toEqual([expect.objectContaining({ content: `choice ${i}!` })]);
      expect(t.metadata).toMatchObject({ choice_index: i, response_id: answer.id });
      expect(t.reward).toBe(1);
    }
    expect(diagnostics.diagnostics.filter((d) => d.severity !== "info")).toEqual([]);
  } finally {
    await proxy.stop();
    await mock.close();
    await store.close();
  }
});
