import type { Span } from "@agl/core";
import { agentNameOf, rewardOf } from "./conventions.js";
import { parseOptions, VisualizeSpansOptionsSchema } from "./options.js";
import { type TraceAnalysis, TraceToTriplets, type TraceToTripletsOptions } from "./trace-to-triplets.js";
import type { TraceNode, TraceTree } from "./tree.js";

export interface VisualizeOptions {
  format?: "text" | "dot";
  /** Decisions to mark on the tree (from `TraceToTriplets.analyze`). */
  analysis?: TraceAnalysis;
  /** Show span durations (default true). */
  durations?: boolean;
}

/**
 * Render a trace tree as indented text (default) or Graphviz DOT. With an analysis, kept LLM calls
 * are marked `[LLM #i reward=…]`, dropped ones `[LLM dropped: reason]`, and reward spans show which
 * call received them.
 */
export function visualize(tree: TraceTree, options: VisualizeOptions = {}): string {
  const marks = markNodes(options.analysis);
  const durations = options.durations ?? true;
  return options.format === "dot" ? renderDot(tree, marks, durations) : toText(tree, marks, durations);
}

export type VisualizeSpansOptions = TraceToTripletsOptions & Pick<VisualizeOptions, "format" | "durations">;

/** Build the tree, analyse it and render it in one call. */
export function visualizeSpans(spans: Span[], options: VisualizeSpansOptions = {}): string {
  parseOptions(VisualizeSpansOptionsSchema, options, "options");
  const { format, durations, ...adapterOptions } = options;
  const analysis = new TraceToTriplets(adapterOptions).analyze(spans);
  return visualize(analysis.tree, { format, durations, analysis });
}

interface Mark {
  label: string;
  kind: "call" | "dropped" | "reward" | "reward-unmatched";
}

function markNodes(analysis: TraceAnalysis | undefined): Map<TraceNode, Mark> {
  const marks = new Map<TraceNode, Mark>();
  if (!analysis) return marks;
  let i = 0;
  const index = new Map<unknown, number>();
  for (const c of analysis.calls) {
    if (c.kept) {
      index.set(c, i);
      const reward = c.reward === null ? "" : ` reward=${c.reward}`;
      const tokens = `${c.call?.promptTokenIds?.length ?? 0}+${c.call?.responseTokenIds?.length ?? 0} tok`;
      marks.set(c.node, { label: `[LLM #${i}${reward}, ${tokens}]`, kind: "call" });
      i++;
    } else {
      marks.set(c.node, { label: `[LLM dropped: ${c.dropReason}]`, kind: "dropped" });
    }
  }
  for (const r of analysis.rewards) {
    const target = r.call ? index.get(r.call) : undefined;
    marks.set(r.node, {
      label:
        target === undefined ? `[reward ${r.value} → unmatched]` : `[reward ${r.value} → LLM #${target}]`,
      kind: target === undefined ? "reward-unmatched" : "reward",
    });
  }
  return marks;
}

function describe(node: TraceNode, durations: boolean): string {
  const parts = [node.virtual ? `${node.span.name} (virtual)` : node.span.name];
  const agent = node.virtual ? null : agentNameOf(node.span);
  if (agent) parts.push(`agent=${agent}`);
  const { start_time: s, end_time: e } = node.span;
  if (durations && s != null && e != null) parts.push(`${((e - s) * 1000).toFixed(1)}ms`);
  return parts.join(" ");
}

function toText(tree: TraceTree, marks: Map<TraceNode, Mark>, durations: boolean): string {
  const lines: string[] = [];
  tree.walk((node, depth) => {
    const mark = marks.get(node);
    const reward = !mark && !node.virtual ? rewardOf(node.span) : null;
    const suffix = mark ? ` ${mark.label}` : reward !== null ? ` [reward ${reward}]` : "";
    lines.push(`${"  ".repeat(depth)}${describe(node, durations)}${suffix}`);
    return true;
  });
  return lines.join("\n");
}

const DOT_STYLE: Record<Mark["kind"], string> = {
  call: 'style=filled fillcolor="#c6f6d5"',
  dropped: 'style=filled fillcolor="#fed7d7"',
  reward: 'style=filled fillcolor="#fefcbf"',
  "reward-unmatched": 'style="filled,dashed" fillcolor="#fefcbf"',
};

function renderDot(tree: TraceTree, marks: Map<TraceNode, Mark>, durations: boolean): string {
  const esc = (s: string) => s.replaceAll("\\", "\\\\").replaceAll('"', '\\"');
  const lines = ["digraph trace {", "  rankdir=TB;", '  node [shape=box fontname="monospace"];'];
  tree.walk((node) => {
    const mark = marks.get(node);
    const label = mark ? `${describe(node, durations)}\n${mark.label}` : describe(node, durations);
    const style = mark ? ` ${DOT_STYLE[mark.kind]}` : node.virtual ? " style=dashed" : "";
    lines.push(`  "${esc(node.id)}" [label="${esc(label).replaceAll("\n", "\\n")}"${style}];`);
    for (const child of node.children) lines.push(`  "${esc(node.id)}" -> "${esc(child.id)}";`);
    return true;
  });
  lines.push("}");
  return lines.join("\n");
}
