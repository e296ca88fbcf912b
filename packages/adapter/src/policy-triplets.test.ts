import { emitReward } from "@agl/core";
import { describe, expect, it } from "vitest";
import { withPolicies } from "./policy-triplets.js";
import { ProxySpansToTriplets } from "./proxy-spans-to-triplets.js";
import { llmAttrs, mkSpan } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";

const call = (seq: number, policy: string | null, ids: number[]) =>
  mkSpan({
    id: `c${seq}`,
    seq,
    start: seq,
    name: "openai.chat.completion",
    attributes: {
      ...llmAttrs({ responseId: `r${seq}`, promptIds: [1, 2], responseIds: ids }),
      ...(policy ? { "agl.proxy.policy": policy } : {}),
    },
  });
const reward = (seq: number, value: number, policy?: string) =>
  mkSpan({
    id: `w${seq}`,
    seq,
    start: seq,
    name: "agentlightning.annotation",
    // what emitReward records (propagate: false returns the attributes without a tracer)
    attributes: emitReward(value, { propagate: false, ...(policy ? { policy } : {}) }).attributes,
  });

describe("triplets per policy", () => {
  it("emitReward({ policy }) records agl.reward.policy; a bad name is a typed error", () => {
    expect(emitReward(1, { propagate: false, policy: "checker" }).attributes["agl.reward.policy"]).toBe(
      "checker",
    );
    expect(emitReward(1, { propagate: false }).attributes["agl.reward.policy"]).toBeUndefined();
    expect(() => emitReward(1, { propagate: false, policy: "" })).toThrow(/policy/);
  });

  it("a reward for one policy goes to that policy's last unrewarded call; an unscoped one to the last call", () => {
    const t = new ProxySpansToTriplets().adapt([
      call(1, "planner", [3]),
      call(2, "checker", [4]),
      reward(3, 0.25, "planner"),
      call(4, "planner", [5]),
      reward(5, 1),
      reward(6, 0.5, "executor"),
    ]);
    expect(t.map((x) => [x.metadata.policy, x.reward, x.metadata.reward_policy])).toEqual([
      ["planner", 0.25, "planner"],
      ["checker", null, undefined],
      ["planner", 1, undefined],
    ]);
    // Without policies nothing changes: single-policy triplets carry no policy key.
    const single = new ProxySpansToTriplets().adapt([call(1, null, [3]), reward(2, 1)]);
    expect(single[0]!.metadata).not.toHaveProperty("policy");
    expect(single[0]!.reward).toBe(1);
  });

  it("withPolicies claims calls by model name or agent span name; the proxy's policy wins", () => {
    const agent = (id: string, name: string, start: number) =>
      mkSpan({
        id,
        name: "agent",
        start,
        end: start + 5,
        attributes: { "agentops.span.kind": "agent", "operation.name": name },
      });
    const llm = (id: string, parent: string, start: number, model: string) =>
      mkSpan({
        id,
        parent,
        name: "openai.chat.completion",
        start,
        end: start + 1,
        attributes: {
          ...llmAttrs({ responseId: `r-${id}`, promptIds: [1], responseIds: [2] }),
          "gen_ai.request.model": model,
        },
      });
    const spans = [
      agent("w", "writer_agent", 0),
      llm("w1", "w", 1, "shared"),
      agent("c", "checker_agent", 10),
      llm("c1", "c", 11, "shared"),
      agent("o", "other", 20),
      llm("o1", "o", 21, "gpt-fixed"),
      llm("o2", "o", 23, "shared"),
    ];
    const adapter = withPolicies(new TraceToTriplets(), {
      writer: { agentMatch: /^writer/ },
      checker: { agentMatch: "checker" },
      judge: { model: ["gpt-fixed"] },
    });
    const { output, diagnostics } = adapter.adaptWithDiagnostics(spans);
    expect(output.map((t) => t.metadata.policy)).toEqual(["writer", "checker", "judge", null]);
    expect(diagnostics.counts.call_without_policy).toBe(1);
    const routed = withPolicies(new ProxySpansToTriplets(), { checker: { model: "m" } }).adapt([
      call(1, "planner", [3]),
    ]);
    expect(routed[0]!.metadata.policy).toBe("planner");
  });
});
