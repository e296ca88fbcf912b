import { describe, expect, it } from "vitest";
import { ProxySpansToTriplets } from "./proxy-spans-to-triplets.js";
import { llmAttrs, mkSpan, rewardAttrs } from "./test-helpers.js";

/** A LiteLLM proxy request as Agent Lightning v0.3 records it: two spans sharing one sequence id. */
function litellmRequest(seq: number, id: string, promptIds: number[], responseIds: number[], start: number) {
  return [
    mkSpan({
      id: `lr-${id}`,
      name: "litellm_request",
      seq,
      start,
      end: start + 1,
      attributes: {
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": `q${seq}`,
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": `a${seq}`,
        "metadata.requester_custom_headers": `{'x-rollout-id': 'ro-1', 'x-attempt-id': 'at-1', 'x-sequence-id': '${seq}'}`,
      },
    }),
    mkSpan({
      id: `raw-${id}`,
      parent: `lr-${id}`,
      name: "raw_gen_ai_request",
      seq,
      start: start + 0.1,
      end: start + 0.9,
      attributes: {
        "llm.hosted_vllm.id": id,
        "llm.hosted_vllm.prompt_token_ids": `[${promptIds.join(", ")}]`,
        "llm.hosted_vllm.choices": `[{'index': 0, 'message': {'role': 'assistant', 'content': 'a${seq}'}, 'token_ids': [${responseIds.join(", ")}], 'finish_reason': 'stop'}]`,
      },
    }),
  ];
}

const rewardSpan = (seq: number, value: number, start: number) =>
  mkSpan({
    id: `rw-${seq}`,
    name: "agentlightning.annotation",
    seq,
    start,
    end: start,
    attributes: rewardAttrs(value),
  });

describe("ProxySpansToTriplets", () => {
  it("orders by sequence id, matches each reward to the latest earlier unrewarded call", () => {
    const spans = [
      rewardSpan(5, 1.0, 50),
      ...litellmRequest(3, "c3", [30], [31], 30),
      ...litellmRequest(1, "c1", [10], [11], 10),
      rewardSpan(2, 0.5, 20),
      ...litellmRequest(4, "c4", [40], [41], 40),
    ];
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics(spans);
    expect(
      output.map((t) => [t.metadata.response_id, t.prompt.token_ids, t.response.token_ids, t.reward]),
    ).toEqual([
      ["c1", [10], [11], 0.5],
      ["c3", [30], [31], null],
      ["c4", [40], [41], 1.0],
    ]);
    expect(diagnostics.diagnostics).toEqual([]);
  });

  it("never gives a reward to a call with the same (or a later) sequence id", () => {
    const spans = [...litellmRequest(2, "c2", [1], [2], 20), rewardSpan(2, 0.9, 25), rewardSpan(1, 0.1, 5)];
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics(spans);
    expect(output.map((t) => t.reward)).toEqual([null]);
    expect(diagnostics.counts.reward_unmatched).toBe(2);
    expect(diagnostics.diagnostics[0]!.message).toMatch(/equal sequence id is never eligible/);
  });

  it("de-duplicates by response id and skips calls without token ids or that failed", () => {
    const ours = (seq: number, responseId: string, extra: Record<string, unknown> = {}) =>
      mkSpan({
        id: `s${seq}`,
        name: "openai.chat.completion",
        seq,
        start: seq,
        end: seq + 0.5,
        attributes: {
          ...llmAttrs({ responseId, promptIds: [seq], responseIds: [seq + 100] }),
          "agl.proxy.status": "ok",
          ...extra,
        } as any,
      });
    const spans = [
      ours(1, "dup"),
      ours(2, "dup"),
      ours(3, "no-ids", {
        prompt_token_ids: undefined,
        response_token_ids: undefined,
        "agl.proxy.token_ids_missing": true,
      }),
      ours(4, "failed", { "agl.proxy.status": "error", "agl.proxy.http_status": 500 }),
      ours(5, "fine"),
    ];
    for (const s of spans)
      for (const k of Object.keys(s.attributes)) if (s.attributes[k] === undefined) delete s.attributes[k];
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics(spans);
    expect(output.map((t) => t.metadata.response_id)).toEqual(["dup", "fine"]);
    expect(output[0]!.response.logprobs).toBeNull();
    expect(diagnostics.counts).toMatchObject({ duplicate_response_id: 1, proxy_span_without_token_ids: 2 });
  });

  it("carries the policy version that served each call as metadata.model_version", () => {
    const span = (seq: number, version?: number | string) =>
      mkSpan({
        id: `v${seq}`,
        name: "openai.chat.completion",
        seq,
        start: seq,
        end: seq + 0.5,
        attributes: {
          ...llmAttrs({ responseId: `r${seq}`, promptIds: [seq], responseIds: [seq + 100] }),
          "agl.proxy.status": "ok",
          ...(version === undefined ? {} : { "agl.proxy.model_version": version }),
        } as any,
      });
    const { output } = new ProxySpansToTriplets().adaptWithDiagnostics([
      span(1, 4),
      span(2, "policy-v5"),
      span(3),
    ]);
    expect(output.map((t) => t.metadata.model_version)).toEqual([4, "policy-v5", null]);
    // Only calls resumed on newer weights mid-generation carry a start version.
    expect(output.map((t) => "model_version_start" in t.metadata)).toEqual([false, false, false]);
  });

  it("carries the first version of a call resumed on newer weights as metadata.model_version_start", () => {
    const span = mkSpan({
      id: "v1",
      name: "openai.chat.completion",
      seq: 1,
      start: 1,
      end: 1.5,
      attributes: {
        ...llmAttrs({ responseId: "r1", promptIds: [1], responseIds: [101, 102] }),
        "agl.proxy.status": "ok",
        "agl.proxy.model_version": 7,
        "agl.proxy.model_version_start": 5,
      } as any,
    });
    const { output } = new ProxySpansToTriplets().adaptWithDiagnostics([span]);
    expect(output[0]!.metadata).toMatchObject({ model_version: 7, model_version_start: 5 });
  });

  it("explains an empty result when no proxy span is present", () => {
    const { output, diagnostics } = new ProxySpansToTriplets().adaptWithDiagnostics([
      mkSpan({ id: "x", name: "agent.run" }),
      mkSpan({ id: "y", name: "tool.call" }),
    ]);
    expect(output).toEqual([]);
    expect(diagnostics.diagnostics[0]).toMatchObject({ code: "no_llm_span_matched", severity: "error" });
    expect(diagnostics.diagnostics[0]!.message).toMatch(/agent\.run, tool\.call/);
  });
});
