import { InvalidArgumentError, type Span, type Triplet } from "@agl/core";
import { describe, expect, it } from "vitest";
import { type Adapter, defineAdapter, each, filter, groupBy, map, pipe, runAdapter } from "./adapter.js";
import { unflattenPrefix } from "./attributes.js";
import { ProxySpansToTriplets } from "./proxy-spans-to-triplets.js";
import { parsePythonLiteral } from "./python-literal.js";
import { llmAttrs, mkSpan, rewardAttrs } from "./test-helpers.js";
import { TraceToMessages } from "./trace-to-messages.js";
import { TraceToTriplets } from "./trace-to-triplets.js";
import { TripletsToTrajectories } from "./trajectory.js";

describe("adapter composition", () => {
  const spansOf = (rollout: string, n: number, withIds: boolean): Span[] => {
    const spans: Span[] = [mkSpan({ id: `${rollout}-root`, name: "run", rollout, start: 0, end: 100 })];
    let prompt = [1];
    for (let i = 0; i < n; i++) {
      const response = [100 + i];
      spans.push(
        mkSpan({
          id: `${rollout}-c${i}`,
          parent: `${rollout}-root`,
          name: "openai.chat.completion",
          rollout,
          start: i * 10 + 1,
          end: i * 10 + 2,
          attributes: llmAttrs(
            withIds
              ? { responseId: `${rollout}-${i}`, promptIds: prompt, responseIds: response }
              : { responseId: `${rollout}-${i}` },
          ),
        }),
      );
      prompt = [...prompt, ...response, 7];
    }
    spans.push(
      mkSpan({
        id: `${rollout}-r`,
        parent: `${rollout}-root`,
        name: "agentlightning.annotation",
        rollout,
        start: 99,
        end: 99,
        attributes: rewardAttrs(1),
      }),
    );
    return spans;
  };

  it("pipe + groupBy: spans of many rollouts → one merged trajectory each, diagnostics from every stage", () => {
    const perRollout = groupBy(
      (s: Span) => s.rollout_id,
      pipe(new TraceToTriplets(), new TripletsToTrajectories()),
    );
    const { output, diagnostics } = perRollout.adaptWithDiagnostics([
      ...spansOf("ro-a", 3, true),
      ...spansOf("ro-b", 2, false),
    ]);
    expect([...output.keys()]).toEqual(["ro-a", "ro-b"]);
    const a = output.get("ro-a")!;
    expect(a).toHaveLength(1);
    expect(a[0]!.response_mask).toEqual([1, 0, 1, 0, 1]);
    expect(a[0]!.reward).toBe(1);
    expect(output.get("ro-b")).toEqual([]);
    // ro-b's two calls had no ids: reported by TraceToTriplets and by the trajectory stage
    expect(diagnostics.counts.missing_token_ids).toBe(4);
    expect(perRollout.name).toBe("groupBy(TraceToTriplets | TripletsToTrajectories)");
  });

  it("defineAdapter, map, filter and each work with plain core Adapters too", () => {
    const plain: Adapter<number, number> = { adapt: (x) => x * 2 };
    const rewarded = defineAdapter("rewarded", (ts: Triplet[], ctx) => {
      const kept = ts.filter((t) => t.reward !== null);
      if (kept.length < ts.length)
        ctx.diagnostics.add("reward_unmatched", "info", `${ts.length - kept.length} unrewarded`);
      return kept;
    });
    const triplets: Triplet[] = [
      { prompt: {}, response: {}, reward: 1, metadata: {} },
      { prompt: {}, response: {}, reward: null, metadata: {} },
    ];
    const result = rewarded.adaptWithDiagnostics(triplets);
    expect(result.output).toHaveLength(1);
    expect(result.diagnostics.summary()).toBe("info reward_unmatched ×1: 1 unrewarded");
    expect(rewarded.adapt(triplets)).toHaveLength(1);

    const doubled = pipe(
      each(plain),
      filter((x: number) => x > 2),
      map((xs: number[]) => xs.length),
    );
    expect(doubled.adapt([1, 2, 3])).toBe(2);
    expect(runAdapter(plain, 4)).toMatchObject({ output: 8, diagnostics: { diagnostics: [] } });
    expect(() => (pipe as any)()).toThrow(/at least one adapter/);
  });
});

describe("parsePythonLiteral", () => {
  it("parses what LiteLLM writes with str()", () => {
    expect(
      parsePythonLiteral("{'a': [1, 2.5, -3e2], \"b\": (True, False, None), 'c': 'it\\'s', 'd': {}}"),
    ).toEqual({
      a: [1, 2.5, -300],
      b: [true, false, null],
      c: "it's",
      d: {},
    });
    expect(parsePythonLiteral("['\\n\\x41\\u00e9']")).toEqual(["\nAé"]);
  });

  it("rejects code and trailing garbage", () => {
    expect(() => parsePythonLiteral("{'a': <function f at 0x1>}")).toThrow(SyntaxError);
    expect(() => parsePythonLiteral("[1, 2] x")).toThrow(/trailing/);
    expect(() => parsePythonLiteral("[1, 2")).toThrow(SyntaxError);
  });
});

describe("unflattenPrefix", () => {
  it("rebuilds lists and objects, drops holes, and switches a list to an object on a named key", () => {
    const a = {
      "gen_ai.prompt.0.role": "user",
      "gen_ai.prompt.0.content": "hi",
      "gen_ai.prompt.2.role": "assistant",
      "gen_ai.prompt.2.tool_calls.0.name": "f",
      "gen_ai.promptx": "not under the prefix",
      "x.0": 1,
      "x.name": "n",
    };
    expect(unflattenPrefix(a, "gen_ai.prompt")).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", tool_calls: [{ name: "f" }] },
    ]);
    expect(unflattenPrefix(a, "x")).toEqual({ "0": 1, name: "n" });
    expect(unflattenPrefix(a, "missing")).toBeUndefined();
  });
});

describe("boundary validation", () => {
  it("bad options and bad input fail with errors naming the field", () => {
    expect(() => new TraceToTriplets({ rewardMatch: "lastOccurrence" as any })).toThrow(InvalidArgumentError);
    expect(() => new TraceToTriplets({ rewardMatch: "lastOccurrence" as any })).toThrow(
      /options\.rewardMatch/,
    );
    expect(() => new TraceToTriplets({ clockSkewSeconds: -1 })).toThrow(/options\.clockSkewSeconds/);
    expect(() => new TripletsToTrajectories({ mode: "rows" as any })).toThrow(/options\.mode/);
    expect(() => new TraceToTriplets().adapt({} as any)).toThrow(/Invalid spans/);
  });

  it("misspelled options are errors naming the key, not silently ignored", () => {
    // @ts-expect-error misspelled on purpose (the compiler catches literals; the runtime check catches the rest)
    const make = () => new TraceToTriplets({ repairHierachy: false });
    expect(make).toThrow(InvalidArgumentError);
    expect(make).toThrow(
      /options\.repairHierachy: unknown option "repairHierachy"; known: .*repairHierarchy/,
    );
    const fromJson = JSON.parse('{"rewardMatch":"firstSibling","clockSkew":0}');
    expect(() => new TraceToTriplets(fromJson)).toThrow(/options\.clockSkew\b/);
    // @ts-expect-error
    expect(() => new TraceToMessages({ llmCallMatcher: "x" })).toThrow(/options\.llmCallMatcher/);
    // @ts-expect-error
    expect(() => new ProxySpansToTriplets({ keepFailed: true })).toThrow(/options\.keepFailed/);
    // @ts-expect-error
    expect(() => new TripletsToTrajectories({ modes: "transition" })).toThrow(/options\.modes/);
    // every valid option is still accepted
    expect(
      () =>
        new TraceToTriplets({
          repairHierarchy: false,
          llmCallMatch: "auto",
          agentMatch: null,
          excludeLlmCallInReward: true,
          rewardMatch: "firstSibling",
          skipEmptyTokenSpans: false,
          joinTokenIdsByResponseId: true,
          clockSkewSeconds: 0,
        }),
    ).not.toThrow();
    expect(() => new TraceToTriplets().adapt([mkSpan({ id: "a", name: "x" }), { name: "y" } as any])).toThrow(
      /spans\[1\]\.span_id/,
    );
  });
});
