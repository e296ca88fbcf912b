/** Deliberately broken traces: the diagnostics must name the cause, and visualize must show it. */
import { describe, expect, it } from "vitest";
import { llmAttrs, mkSpan, rewardAttrs } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";
import { TripletsToTrajectories } from "./trajectory.js";
import { visualize, visualizeSpans } from "./visualize.js";

describe("diagnostics on broken traces", () => {
  it("no LLM span: lists the span names it saw and the pattern", () => {
    const spans = [
      mkSpan({ id: "a", name: "agent.run", start: 0, end: 5 }),
      mkSpan({ id: "b", parent: "a", name: "http.request", start: 1, end: 2 }),
      mkSpan({ id: "c", parent: "a", name: "http.request", start: 2, end: 3 }),
      mkSpan({
        id: "r",
        parent: "a",
        name: "agentlightning.annotation",
        start: 4,
        end: 4,
        attributes: rewardAttrs(1),
      }),
    ];
    const { output, diagnostics } = new TraceToTriplets({
      llmCallMatch: /openai\.chat\.completion/,
    }).adaptWithDiagnostics(spans);
    expect(output).toEqual([]);
    const d = diagnostics.diagnostics.find((x) => x.code === "no_llm_span_matched")!;
    expect(d.severity).toBe("error");
    expect(d.message).toContain("agent.run, http.request, agentlightning.annotation");
    expect(d.details).toMatchObject({
      spanNames: { "http.request": 2 },
      pattern: "/openai\\.chat\\.completion/",
    });
    // the reward had nowhere to go, and says so
    expect(diagnostics.diagnostics.find((x) => x.code === "reward_unmatched")!.message).toMatch(
      /no kept LLM call precedes it/,
    );
    expect(diagnostics.summary()).toMatch(/^error no_llm_span_matched/);
  });

  it("a call without an end time cannot take a reward, and says so", () => {
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics([
      mkSpan({ id: "root", name: "run", start: 0, end: 10 }),
      mkSpan({
        id: "c",
        parent: "root",
        name: "openai.chat.completion",
        start: 1,
        end: null,
        attributes: llmAttrs({ responseId: "r", promptIds: [1], responseIds: [2] }),
      }),
      mkSpan({
        id: "rw",
        parent: "root",
        name: "agentlightning.annotation",
        start: 5,
        end: 5,
        attributes: rewardAttrs(1),
      }),
    ]);
    expect(output.map((t) => t.reward)).toEqual([null]);
    expect(diagnostics.counts).toMatchObject({ missing_timestamps: 1, reward_unmatched: 1 });
  });

  it("a span matched but carries nothing readable", () => {
    const { diagnostics } = new TraceToTriplets().adaptWithDiagnostics([
      mkSpan({ id: "x", name: "openai.chat.completion", attributes: { "gen_ai.request.model": "m" } }),
    ]);
    expect(diagnostics.diagnostics[0]).toMatchObject({ code: "llm_span_unreadable", spanId: "x" });
  });

  it("a call without token ids says which ids are missing and how to get them", () => {
    const { diagnostics } = new TraceToTriplets().adaptWithDiagnostics([
      mkSpan({
        id: "x",
        name: "openai.chat.completion",
        attributes: llmAttrs({ responseId: "r", promptIds: [1] }),
      }),
    ]);
    const d = diagnostics.diagnostics.find((x) => x.code === "missing_token_ids")!;
    expect(d.message).toMatch(/no response token ids/);
    expect(d.message).toMatch(/return_token_ids/);
  });

  it("agentMatch that matches nothing names the agents it saw", () => {
    const spans = [
      mkSpan({ id: "a", name: "agent", start: 0, end: 5, attributes: { "agent.name": "Planner" } }),
      mkSpan({
        id: "c",
        parent: "a",
        name: "openai.chat.completion",
        start: 1,
        end: 2,
        attributes: llmAttrs({ responseId: "r" }),
      }),
    ];
    const { output, diagnostics } = new TraceToTriplets({ agentMatch: "planner" }).adaptWithDiagnostics(
      spans,
    );
    expect(output).toEqual([]);
    expect(diagnostics.diagnostics[0]!.message).toMatch(
      /not inside an agent matching \/planner\/ \(agent: Planner\)/,
    );
  });

  it("prefix mismatch at token k is reported by the trajectory adapter", () => {
    const t = (p: number[], r: number[]) => ({
      prompt: { token_ids: p },
      response: { token_ids: r },
      reward: null,
      metadata: {},
    });
    const { diagnostics } = new TripletsToTrajectories().adaptWithDiagnostics([
      t([1, 2, 3], [4]),
      t([1, 2, 9, 4, 5], [6]),
    ]);
    expect(diagnostics.diagnostics.find((d) => d.code === "prefix_mismatch")!.message).toMatch(
      /at token 2 \(expected 3, got 9\)/,
    );
  });
});

describe("visualize", () => {
  const spans = [
    mkSpan({ id: "root", name: "rollout", start: 0, end: 10, attributes: { "agent.name": "solver" } }),
    mkSpan({
      id: "c1",
      parent: "root",
      name: "openai.chat.completion",
      start: 1,
      end: 2,
      attributes: llmAttrs({ responseId: "r1", promptIds: [1, 2], responseIds: [3] }),
    }),
    mkSpan({
      id: "dup",
      parent: "root",
      name: "openai.chat.completion",
      start: 2.5,
      end: 2.8,
      attributes: llmAttrs({ responseId: "r1" }),
    }),
    mkSpan({
      id: "rw",
      parent: "root",
      name: "agentlightning.annotation",
      start: 3,
      end: 3,
      attributes: rewardAttrs(0.5),
    }),
    mkSpan({
      id: "rw2",
      parent: "root",
      name: "agentlightning.annotation",
      start: 4,
      end: 4,
      attributes: rewardAttrs(0.9),
    }),
  ];

  it("renders indented text marking kept and dropped calls and where rewards went", () => {
    expect(visualizeSpans(spans)).toBe(
      [
        "rollout agent=solver 10000.0ms",
        "  openai.chat.completion 1000.0ms [LLM #0 reward=0.5, 2+1 tok]",
        "  openai.chat.completion 300.0ms [LLM dropped: duplicate_response_id]",
        "  agentlightning.annotation 0.0ms [reward 0.5 → LLM #0]",
        "  agentlightning.annotation 0.0ms [reward 0.9 → unmatched]",
      ].join("\n"),
    );
  });

  it("renders DOT with one node per span, edges, and marks", () => {
    const analysis = new TraceToTriplets().analyze(spans);
    const dot = visualize(analysis.tree, { format: "dot", analysis });
    expect(dot.startsWith("digraph trace {")).toBe(true);
    expect(dot).toContain('"root" -> "c1";');
    expect(dot).toContain('"root" -> "rw2";');
    expect(dot).toMatch(
      /"c1" \[label="openai\.chat\.completion 1000\.0ms\\n\[LLM #0 reward=0\.5, 2\+1 tok\]" style=filled/,
    );
    expect(dot).toMatch(/"rw2" \[label=.*unmatched\]" style="filled,dashed"/);
    expect(dot.trim().endsWith("}")).toBe(true);
  });

  it("marks virtual nodes", () => {
    const text = visualizeSpans([mkSpan({ id: "orphan", parent: "lost", name: "child", start: 0, end: 1 })], {
      durations: false,
    });
    expect(text.split("\n")).toEqual(["agentlightning.virtual (virtual)", "  child"]);
  });

  it("durations: false drops the times from text and DOT, and adapter options still apply", () => {
    const text = visualizeSpans(spans, { durations: false, rewardMatch: "firstSibling" });
    expect(text).not.toMatch(/ms\b/);
    expect(text.split("\n").slice(0, 2)).toEqual([
      "rollout agent=solver",
      "  openai.chat.completion [LLM #0 reward=0.5, 2+1 tok]",
    ]);
    const dot = visualizeSpans(spans, { format: "dot", durations: false });
    expect(dot).toContain('"c1" [label="openai.chat.completion\\n[LLM #0 reward=0.5, 2+1 tok]"');
    expect(dot).not.toMatch(/ms\\n|ms"/);
    // the default keeps them
    expect(visualizeSpans(spans, { format: "dot" })).toContain("openai.chat.completion 1000.0ms");
  });

  it("visualizeSpans rejects a misspelled option, naming it", () => {
    // @ts-expect-error misspelled on purpose: the type rejects it, and so does the runtime check
    expect(() => visualizeSpans(spans, { duration: false })).toThrow(
      /options\.duration: unknown option "duration"; known: .*durations/,
    );
    // @ts-expect-error a wrong type for a rendering option
    expect(() => visualizeSpans(spans, { format: "svg" })).toThrow(/options\.format/);
  });
});
