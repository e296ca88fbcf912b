import { describe, expect, it } from "vitest";
import { llmAttrs, mkSpan, rewardAttrs } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";

const call = (id: string, parent: string | null, start: number, end: number, responseId = `resp-${id}`) =>
  mkSpan({
    id,
    parent,
    name: "openai.chat.completion",
    start,
    end,
    attributes: llmAttrs({
      responseId,
      prompt: `p-${id}`,
      promptIds: [1, 2],
      responseIds: [3, 4],
      logprobs: [-0.1, -0.2],
    }),
  });
const reward = (id: string, parent: string | null, start: number, value: number) =>
  mkSpan({
    id,
    parent,
    name: "agentlightning.annotation",
    start,
    end: start + 0.1,
    attributes: rewardAttrs(value),
  });

describe("TraceToTriplets", () => {
  it("turns our tracer's LLM spans into triplets with token ids, logprobs, raw content and metadata", () => {
    const spans = [
      mkSpan({ id: "root", name: "rollout", start: 0, end: 10 }),
      call("c1", "root", 1, 2),
      reward("r1", "root", 3, 0.5),
    ];
    const [t, ...rest] = new TraceToTriplets().adapt(spans);
    expect(rest).toEqual([]);
    expect(t!.prompt).toEqual({
      token_ids: [1, 2],
      raw_content: [{ role: "user", content: "p-c1" }],
      image_urls: [],
    });
    expect(t!.response).toEqual({
      token_ids: [3, 4],
      raw_content: [{ role: "assistant", content: "hello", finish_reason: "stop" }],
      logprobs: [-0.1, -0.2],
    });
    expect(t!.reward).toBe(0.5);
    expect(t!.metadata).toMatchObject({
      response_id: "resp-c1",
      agent_name: null,
      request: { model: "m", temperature: 1 },
      response: { id: "resp-c1", model: "m" },
    });
  });

  it("reads token ids from Weave keys and from LiteLLM's stringified Python literals", () => {
    const weave = mkSpan({
      id: "w",
      name: "openai.chat.completion",
      start: 1,
      end: 2,
      attributes: {
        "agentlightning.operation.name": "openai.chat.completion",
        "agentlightning.operation.output.id": "resp-w",
        "agentlightning.operation.output.prompt_token_ids": [5, 6, 7],
        "agentlightning.operation.output.choices.0.token_ids": [8, 9],
        "agentlightning.operation.output.choices.0.message.role": "assistant",
        "agentlightning.operation.output.choices.0.message.content": "ok",
      },
    });
    const raw = mkSpan({
      id: "raw",
      name: "raw_gen_ai_request",
      start: 3,
      end: 4,
      attributes: {
        "llm.hosted_vllm.id": "chatcmpl-raw",
        "llm.hosted_vllm.prompt_token_ids": "[11, 12]",
        "llm.hosted_vllm.choices":
          "[{'finish_reason': 'stop', 'index': 0, 'message': {'content': 'Hi', 'role': 'assistant', 'tool_calls': None}, 'token_ids': [13, 14, 15]}]",
      },
    });
    const triplets = new TraceToTriplets({
      llmCallMatch: /openai\.chat\.completion|raw_gen_ai_request/,
    }).adapt([weave, raw]);
    expect(triplets.map((t) => [t.prompt.token_ids, t.response.token_ids, t.metadata.response_id])).toEqual([
      [[5, 6, 7], [8, 9], "resp-w"],
      [[11, 12], [13, 14, 15], "chatcmpl-raw"],
    ]);
  });

  it("de-duplicates one call traced in two agents by response id (global seen-set)", () => {
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 10 }),
      mkSpan({
        id: "a1",
        parent: "root",
        name: "agent",
        start: 0,
        end: 5,
        attributes: { "agent.name": "writer" },
      }),
      call("c1", "a1", 1, 2, "same"),
      mkSpan({
        id: "a2",
        parent: "root",
        name: "agent",
        start: 5,
        end: 10,
        attributes: { "agent.name": "critic" },
      }),
      call("c2", "a2", 6, 7, "same"),
      call("c3", "a2", 8, 9, "other"),
    ];
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics(spans);
    expect(output.map((t) => [t.metadata.response_id, t.metadata.agent_name])).toEqual([
      ["same", "writer"],
      ["other", "critic"],
    ]);
    expect(diagnostics.counts.duplicate_response_id).toBe(1);
  });

  it("agentMatch keeps only calls inside matching agents; a nested agent name clears the match", () => {
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 20 }),
      mkSpan({
        id: "a1",
        parent: "root",
        name: "agent",
        start: 0,
        end: 10,
        attributes: { "agent.name": "policy" },
      }),
      call("c1", "a1", 1, 2),
      mkSpan({
        id: "sub",
        parent: "a1",
        name: "agent",
        start: 3,
        end: 9,
        attributes: { "agent.name": "helper" },
      }),
      call("c2", "sub", 4, 5),
      mkSpan({
        id: "a2",
        parent: "root",
        name: "op",
        start: 10,
        end: 20,
        attributes: {
          "agentlightning.operation.input.type": "agent",
          "agentlightning.operation.input.name": "policy-2",
        },
      }),
      call("c3", "a2", 11, 12),
    ];
    const { output, diagnostics } = new TraceToTriplets({ agentMatch: /^policy/ }).adaptWithDiagnostics(
      spans,
    );
    expect(output.map((t) => t.metadata.response_id)).toEqual(["resp-c1", "resp-c3"]);
    expect(output.map((t) => t.metadata.agent_name)).toEqual(["policy", "policy-2"]);
    expect(diagnostics.diagnostics.find((d) => d.code === "llm_call_outside_agent")!.message).toMatch(
      /helper/,
    );
  });

  it("excludes LLM calls under reward spans (graders) unless told not to", () => {
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 10 }),
      call("c1", "root", 1, 2),
      mkSpan({
        id: "grader",
        parent: "root",
        name: "agentlightning.operation",
        start: 3,
        end: 6,
        attributes: { "agentlightning.operation.name": "agentlightning.reward" },
      }),
      call("judge", "grader", 4, 5),
      reward("r", "root", 7, 1),
    ];
    const excluded = new TraceToTriplets().adaptWithDiagnostics(spans);
    expect(excluded.output.map((t) => [t.metadata.response_id, t.reward])).toEqual([["resp-c1", 1]]);
    expect(excluded.diagnostics.counts.llm_call_under_reward).toBe(1);
    const included = new TraceToTriplets({ excludeLlmCallInReward: false }).adapt(spans);
    expect(included.map((t) => [t.metadata.response_id, t.reward])).toEqual([
      ["resp-c1", null],
      ["resp-judge", 1],
    ]);
  });

  it("firstOccurrence and firstSibling match rewards differently", () => {
    // round 1: a call nested in a step, the reward beside the step; round 2: call and reward siblings
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 30 }),
      mkSpan({ id: "step1", parent: "root", name: "step", start: 0, end: 5 }),
      call("c1", "step1", 1, 2),
      reward("r1", "root", 6, 0.3),
      mkSpan({ id: "step2", parent: "root", name: "step", start: 10, end: 20 }),
      call("c2", "step2", 11, 12),
      reward("r2", "step2", 13, 0.7),
      call("c3", "step2", 14, 15),
    ];
    const occurrence = new TraceToTriplets({ rewardMatch: "firstOccurrence" }).adapt(spans);
    expect(occurrence.map((t) => t.reward)).toEqual([0.3, 0.7, null]);
    const sibling = new TraceToTriplets({ rewardMatch: "firstSibling" }).adaptWithDiagnostics(spans);
    // r1's siblings are the two steps, not calls: it matches nothing under firstSibling
    expect(sibling.output.map((t) => t.reward)).toEqual([null, 0.7, null]);
    expect(sibling.diagnostics.diagnostics.find((d) => d.code === "reward_unmatched")!.message).toMatch(
      /0\.3/,
    );
  });

  it("a reward never goes to a call that ended after the reward started, nor to an already-rewarded call", () => {
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 30 }),
      call("c1", "root", 1, 2),
      reward("r1", "root", 3, 1),
      reward("r2", "root", 4, 2),
      call("c2", "root", 5, 8),
      reward("r3", "root", 7, 3),
    ];
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics(spans);
    expect(output.map((t) => t.reward)).toEqual([1, null]);
    expect(diagnostics.counts.reward_unmatched).toBe(2);
  });

  it("collects image URLs from multimodal prompts, JSON-string content included", () => {
    const parts = [
      { type: "text", text: "what is this?" },
      { type: "image_url", image_url: { url: "https://example.com/cat.png" } },
      { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } },
    ];
    const spans = [
      mkSpan({
        id: "c",
        name: "openai.chat.completion",
        attributes: {
          ...llmAttrs({ responseId: "r", promptIds: [1], responseIds: [2] }),
          "gen_ai.prompt.0.content": JSON.stringify(parts),
          "gen_ai.prompt.1.role": "user",
          "gen_ai.prompt.1.content": JSON.stringify([
            { type: "image_url", image_url: { url: "https://example.com/dog.jpg" } },
          ]),
        },
      }),
    ];
    const [t] = new TraceToTriplets().adapt(spans);
    expect(t!.prompt.image_urls).toEqual([
      "https://example.com/cat.png",
      "data:image/png;base64,AAAA",
      "https://example.com/dog.jpg",
    ]);
  });

  it("skipEmptyTokenSpans drops calls without token ids and reports a reward lost with them", () => {
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 10 }),
      mkSpan({
        id: "c",
        parent: "root",
        name: "openai.chat.completion",
        start: 1,
        end: 2,
        attributes: llmAttrs({ responseId: "x" }),
      }),
      reward("r", "root", 3, 1),
    ];
    const kept = new TraceToTriplets().adaptWithDiagnostics(spans);
    expect(kept.output).toHaveLength(1);
    expect(kept.output[0]!.prompt.token_ids).toEqual([]);
    expect(kept.diagnostics.counts.missing_token_ids).toBe(1);
    const skipped = new TraceToTriplets({ skipEmptyTokenSpans: true }).adaptWithDiagnostics(spans);
    expect(skipped.output).toEqual([]);
    expect(skipped.diagnostics.counts).toMatchObject({ missing_token_ids: 1, reward_lost_with_call: 1 });
  });

  it("fills token ids of a client span from a proxy span with the same response id", () => {
    const client = mkSpan({
      id: "client",
      parent: "agent",
      name: "ai.generateText.doGenerate",
      start: 1,
      end: 3,
      attributes: {
        "ai.prompt.messages": JSON.stringify([{ role: "user", content: [{ type: "text", text: "hi" }] }]),
        "ai.response.text": "hello",
        "ai.response.id": "chatcmpl-1",
        "agent.name": "vercel-agent",
      },
    });
    const proxy = mkSpan({
      id: "proxy",
      name: "openai.chat.completion",
      start: 1.5,
      end: 2.5,
      attributes: llmAttrs({ responseId: "chatcmpl-1", promptIds: [1, 2, 3], responseIds: [4, 5] }),
    });
    const agent = mkSpan({
      id: "agent",
      name: "agent",
      start: 0,
      end: 10,
      attributes: { "agent.name": "vercel-agent" },
    });
    const { output, diagnostics } = new TraceToTriplets({ agentMatch: "vercel-agent" }).adaptWithDiagnostics([
      agent,
      client,
      proxy,
    ]);
    expect(output).toHaveLength(1);
    expect(output[0]!.prompt.token_ids).toEqual([1, 2, 3]);
    expect(output[0]!.response.token_ids).toEqual([4, 5]);
    expect(output[0]!.metadata.family).toBe("vercel-ai");
    expect(diagnostics.counts.token_ids_joined).toBe(1);
  });

  it("reads nested (OTLP-ingested) attributes like flat ones", () => {
    const span = mkSpan({
      id: "c",
      name: "openai.chat.completion",
      attributes: {
        gen_ai: {
          prompt: { "0": { role: "user", content: "q" } },
          completion: { "0": { role: "assistant", content: "a" } },
          response: { id: "nested" },
        },
        prompt_token_ids: [1],
        response_token_ids: [2],
      } as any,
    });
    const [t] = new TraceToTriplets().adapt([span]);
    expect(t!.metadata.response_id).toBe("nested");
    expect(t!.prompt.raw_content).toEqual([{ role: "user", content: "q" }]);
  });

  it("tolerates a millisecond of clock skew between a call's end and the reward (configurable)", () => {
    // the reward was stamped with Date.now() (ms-truncated) just after the call's OTel end time
    const spans = [
      mkSpan({ id: "root", name: "run", start: 0, end: 10 }),
      call("c1", "root", 1, 2.0007),
      reward("r", "root", 2, 1),
    ];
    expect(new TraceToTriplets().adapt(spans).map((t) => t.reward)).toEqual([1]);
    expect(new TraceToTriplets({ clockSkewSeconds: 0 }).adapt(spans).map((t) => t.reward)).toEqual([null]);
  });

  it("counts a LiteLLM proxy request once and lends its token ids to the client span with the same id", () => {
    const client = mkSpan({
      id: "client",
      name: "openai.chat.completion",
      start: 1,
      end: 3,
      attributes: llmAttrs({ responseId: "chatcmpl-9", prompt: "q" }),
    });
    const litellm = mkSpan({
      id: "lr",
      name: "litellm_request",
      start: 1.1,
      end: 2.9,
      attributes: { "gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": "q" },
    });
    const raw = mkSpan({
      id: "raw",
      parent: "lr",
      name: "raw_gen_ai_request",
      start: 1.2,
      end: 2.8,
      attributes: {
        "llm.hosted_vllm.id": "chatcmpl-9",
        "llm.hosted_vllm.prompt_token_ids": "[1, 2]",
        "llm.hosted_vllm.response_token_ids": "[[3, 4, 5]]",
      },
    });
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics([client, litellm, raw]);
    expect(output.map((t) => [t.metadata.span_id, t.prompt.token_ids, t.response.token_ids])).toEqual([
      ["client", [1, 2], [3, 4, 5]],
    ]);
    expect(diagnostics.counts.token_ids_joined).toBe(1);
  });
});
