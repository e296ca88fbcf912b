import { InvalidArgumentError } from "@agl/core";
import { describe, expect, it } from "vitest";
import { DiagnosticsCollector } from "./diagnostics.js";
import { mkSpan } from "./test-helpers.js";
import { TraceTree, VIRTUAL_ROOT_ID, VIRTUAL_SPAN_NAME } from "./tree.js";

const names = (tree: TraceTree) => tree.preorder().map((n) => n.span.name);

describe("TraceTree.fromSpans", () => {
  it("builds the same tree from out-of-order input, children in input order", () => {
    const spans = [
      mkSpan({ id: "c2", parent: "root", name: "c2", start: 3, end: 4 }),
      mkSpan({ id: "g1", parent: "c1", name: "g1", start: 1.5, end: 1.7 }),
      mkSpan({ id: "root", name: "root", start: 0, end: 10 }),
      mkSpan({ id: "c1", parent: "root", name: "c1", start: 1, end: 2 }),
    ];
    const tree = TraceTree.fromSpans(spans);
    expect(tree.root.id).toBe("root");
    // children keep input order (c2 came first), not time order
    expect(tree.root.children.map((c) => c.id)).toEqual(["c2", "c1"]);
    expect(names(tree)).toEqual(["root", "c2", "c1", "g1"]);
    expect(tree.nodes.get("g1")!.parent!.id).toBe("c1");
  });

  it("joins several roots under a virtual root spanning their times", () => {
    const diagnostics = new DiagnosticsCollector();
    const tree = TraceTree.fromSpans(
      [mkSpan({ id: "a", name: "a", start: 5, end: 6 }), mkSpan({ id: "b", name: "b", start: 1, end: 3 })],
      diagnostics,
    );
    expect(tree.root.id).toBe(VIRTUAL_ROOT_ID);
    expect(tree.root.virtual).toBe(true);
    expect(tree.root.children.map((c) => c.id)).toEqual(["a", "b"]);
    expect([tree.root.span.start_time, tree.root.span.end_time]).toEqual([1, 6]);
    expect(diagnostics.report().counts.virtual_root).toBe(1);
  });

  it("creates a virtual node for a missing parent, keyed by the parent id", () => {
    const diagnostics = new DiagnosticsCollector();
    const tree = TraceTree.fromSpans(
      [
        mkSpan({ id: "x", parent: "ghost", name: "x", start: 2, end: 3 }),
        mkSpan({ id: "y", parent: "ghost", name: "y", start: 4, end: 7 }),
      ],
      diagnostics,
    );
    expect(tree.root.id).toBe("ghost");
    expect(tree.root.virtual).toBe(true);
    expect(tree.root.span.name).toBe(VIRTUAL_SPAN_NAME);
    expect(tree.root.children.map((c) => c.id)).toEqual(["x", "y"]);
    expect([tree.root.span.start_time, tree.root.span.end_time]).toEqual([2, 7]);
    expect(diagnostics.report().diagnostics[0]).toMatchObject({
      code: "missing_parent",
      details: { parentId: "ghost" },
    });
  });

  it("raises a clear error on empty input", () => {
    expect(() => TraceTree.fromSpans([])).toThrow(InvalidArgumentError);
    expect(() => TraceTree.fromSpans([])).toThrow(/empty list of spans/);
  });

  it("keeps the first of two spans with one id, and breaks parent cycles", () => {
    const diagnostics = new DiagnosticsCollector();
    const tree = TraceTree.fromSpans(
      [
        mkSpan({ id: "r", name: "r" }),
        mkSpan({ id: "r", name: "r-again" }),
        mkSpan({ id: "p", parent: "q", name: "p" }),
        mkSpan({ id: "q", parent: "p", name: "q" }),
      ],
      diagnostics,
    );
    expect(tree.nodes.get("r")!.span.name).toBe("r");
    expect(names(tree).sort()).toEqual(["p", "q", "r", VIRTUAL_SPAN_NAME].sort());
    expect(diagnostics.report().counts).toMatchObject({ duplicate_span_id: 1, parent_cycle: 1 });
  });
});

describe("repairHierarchy", () => {
  it("moves flat children under the tightest enclosing span, through a single-child wrapper", () => {
    // session wrapper → agent root with flat children, as AgentOps produces when async context is lost
    const spans = [
      mkSpan({ id: "session", name: "session", start: 0, end: 100 }),
      mkSpan({ id: "root", parent: "session", name: "agent-run", start: 0, end: 100 }),
      mkSpan({ id: "agentA", parent: "root", name: "agentA", start: 10, end: 50 }),
      mkSpan({ id: "tool", parent: "root", name: "tool", start: 20, end: 40 }),
      mkSpan({ id: "llm", parent: "root", name: "llm", start: 25, end: 30 }),
      mkSpan({ id: "agentB", parent: "root", name: "agentB", start: 60, end: 90 }),
      mkSpan({ id: "llm2", parent: "root", name: "llm2", start: 61, end: 70 }),
    ];
    const diagnostics = new DiagnosticsCollector();
    const tree = TraceTree.fromSpans(spans).repairHierarchy(diagnostics);
    const root = tree.nodes.get("root")!;
    expect(root.children.map((c) => c.id)).toEqual(["agentA", "agentB"]);
    expect(tree.nodes.get("tool")!.parent!.id).toBe("agentA");
    // llm is enclosed by agentA (slack 45) and tool (slack 15): the tighter one wins
    expect(tree.nodes.get("llm")!.parent!.id).toBe("tool");
    expect(tree.nodes.get("llm2")!.parent!.id).toBe("agentB");
    expect(diagnostics.report().counts.reparented).toBe(3);
  });

  it("rebuilds several levels from a flat list, whatever the input order, keeping moved subtrees", () => {
    // agent ⊃ step ⊃ tool ⊃ llm, all flattened under root, innermost first; "io" already hangs off tool,
    // and "plan" already sits under agentB with an llm that belongs inside it
    const spans = [
      mkSpan({ id: "root", name: "root", start: 0, end: 100 }),
      mkSpan({ id: "llm", parent: "root", name: "llm", start: 22, end: 24 }),
      mkSpan({ id: "tool", parent: "root", name: "tool", start: 20, end: 30 }),
      mkSpan({ id: "io", parent: "tool", name: "io", start: 26, end: 28 }),
      mkSpan({ id: "step", parent: "root", name: "step", start: 15, end: 35 }),
      mkSpan({ id: "agentA", parent: "root", name: "agentA", start: 10, end: 40 }),
      mkSpan({ id: "agentB", parent: "root", name: "agentB", start: 50, end: 90 }),
      mkSpan({ id: "plan", parent: "agentB", name: "plan", start: 55, end: 70 }),
      mkSpan({ id: "llm2", parent: "root", name: "llm2", start: 60, end: 65 }),
    ];
    const diagnostics = new DiagnosticsCollector();
    const tree = TraceTree.fromSpans(spans).repairHierarchy(diagnostics);
    const path = (id: string) => {
      const out: string[] = [];
      for (let n = tree.nodes.get(id); n; n = n.parent ?? undefined) out.unshift(n.id);
      return out.join("/");
    };
    expect(tree.root.children.map((c) => c.id)).toEqual(["agentA", "agentB"]);
    expect(path("llm")).toBe("root/agentA/step/tool/llm");
    expect(path("io")).toBe("root/agentA/step/tool/io");
    // the search descends into existing subtrees: plan (depth 2) is tighter than agentB
    expect(path("llm2")).toBe("root/agentB/plan/llm2");
    expect(diagnostics.report().counts.reparented).toBe(4);
    // every span is still in the tree exactly once
    expect(
      tree
        .preorder()
        .map((n) => n.id)
        .sort(),
    ).toEqual(spans.map((s) => s.span_id).sort());
  });

  it("leaves spans with identical times and spans without times in place", () => {
    const tree = TraceTree.fromSpans([
      mkSpan({ id: "root", name: "root", start: 0, end: 10 }),
      mkSpan({ id: "a", parent: "root", name: "a", start: 1, end: 2 }),
      mkSpan({ id: "b", parent: "root", name: "b", start: 1, end: 2 }),
      mkSpan({ id: "c", parent: "root", name: "c", start: null, end: null }),
    ]).repairHierarchy();
    expect(tree.root.children.map((c) => c.id)).toEqual(["a", "b", "c"]);
  });
});
