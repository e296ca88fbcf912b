import { rewardOf, type TraceNode, TraceTree, VIRTUAL_ROOT_ID } from "@agl/adapter";
import type { Span } from "@agl/core";

/** One line of the span tree, with its bar on the rollout's timeline. */
export interface SpanRow {
  spanId: string;
  name: string;
  depth: number;
  /** A stand-in for a parent the store does not have (or the root joining several roots). */
  virtual: boolean;
  startTime: number | null;
  endTime: number | null;
  durationSeconds: number | null;
  /** Where the bar starts and how wide it is, as fractions of the timeline (0..1). */
  offset: number;
  width: number;
  statusCode: string;
  attemptId: string;
  sequenceId: number;
  reward: number | null;
  childCount: number;
  span: Span;
}

export interface SpanTimeline {
  rows: SpanRow[];
  startTime: number | null;
  endTime: number | null;
  durationSeconds: number | null;
}

const byStart = (a: TraceNode, b: TraceNode) =>
  (a.span.start_time ?? Number.POSITIVE_INFINITY) - (b.span.start_time ?? Number.POSITIVE_INFINITY);

/**
 * The spans of a rollout as an indented tree (children in start-time order, ties in store order) plus
 * timeline bars. Missing parents appear as virtual rows; several roots are shown side by side without
 * the virtual root that joins them.
 */
export function buildSpanTimeline(spans: readonly Span[]): SpanTimeline {
  if (spans.length === 0) return { rows: [], startTime: null, endTime: null, durationSeconds: null };
  const tree = TraceTree.fromSpans(spans);
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const s of spans) {
    if (s.start_time != null) start = Math.min(start, s.start_time);
    if (s.end_time != null) end = Math.max(end, s.end_time);
    else if (s.start_time != null) end = Math.max(end, s.start_time);
  }
  const hasTimes = Number.isFinite(start) && Number.isFinite(end);
  const total = hasTimes ? Math.max(end - start, 1e-9) : 1;

  const rows: SpanRow[] = [];
  const visit = (node: TraceNode, depth: number) => {
    const s = node.span;
    const duration = s.start_time != null && s.end_time != null ? s.end_time - s.start_time : null;
    const offset = hasTimes && s.start_time != null ? (s.start_time - start) / total : 0;
    rows.push({
      spanId: node.id,
      name: s.name,
      depth,
      virtual: node.virtual,
      startTime: s.start_time ?? null,
      endTime: s.end_time ?? null,
      durationSeconds: duration,
      offset: clamp01(offset),
      width: duration === null ? 0 : clamp01(Math.min(duration / total, 1 - offset)),
      statusCode: s.status?.status_code ?? "UNSET",
      attemptId: s.attempt_id,
      sequenceId: s.sequence_id,
      reward: node.virtual ? null : rewardOf(s),
      childCount: node.children.length,
      span: s,
    });
    for (const child of node.children.slice().sort(byStart)) visit(child, depth + 1);
  };
  const top = tree.root.id === VIRTUAL_ROOT_ID && tree.root.virtual ? tree.root.children : [tree.root];
  for (const node of top.slice().sort(byStart)) visit(node, 0);
  return {
    rows,
    startTime: hasTimes ? start : null,
    endTime: hasTimes ? end : null,
    durationSeconds: hasTimes ? end - start : null,
  };
}

function clamp01(x: number): number {
  return Math.min(1, Math.max(0, x));
}
