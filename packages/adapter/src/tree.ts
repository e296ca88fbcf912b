import { InvalidArgumentError, type Span } from "@agl/core";
import { DiagnosticsCollector } from "./diagnostics.js";

export const VIRTUAL_SPAN_NAME = "agentlightning.virtual";
export const VIRTUAL_ROOT_ID = "virtual-root";

export interface TraceNode {
  id: string;
  span: Span;
  children: TraceNode[];
  parent: TraceNode | null;
  /** A stand-in for a referenced-but-missing parent, or the virtual root. */
  virtual: boolean;
}

/** The spans of one trace (or rollout) arranged by parent links. */
export class TraceTree {
  private constructor(
    readonly root: TraceNode,
    readonly nodes: Map<string, TraceNode>,
  ) {}

  /**
   * Build from spans in any order. Children keep input order; a missing parent becomes a virtual
   * node spanning its children's times; several roots are joined under a `virtual-root`.
   * @throws InvalidArgumentError on empty input.
   */
  static fromSpans(spans: readonly Span[], diagnostics = new DiagnosticsCollector()): TraceTree {
    if (spans.length === 0) {
      throw new InvalidArgumentError("spans", "cannot build a trace tree from an empty list of spans");
    }
    const nodes = new Map<string, TraceNode>();
    const ordered: TraceNode[] = [];
    for (const span of spans) {
      if (nodes.has(span.span_id)) {
        diagnostics.add(
          "duplicate_span_id",
          "warning",
          `span id ${span.span_id} appears twice; kept the first`,
          {
            spanId: span.span_id,
            spanName: span.name,
          },
        );
        continue;
      }
      const node: TraceNode = { id: span.span_id, span, children: [], parent: null, virtual: false };
      nodes.set(span.span_id, node);
      ordered.push(node);
    }

    const roots: TraceNode[] = [];
    const virtuals: TraceNode[] = [];
    for (const node of ordered) {
      const parentId = node.span.parent_id;
      if (parentId === null || parentId === undefined || parentId === "") {
        roots.push(node);
        continue;
      }
      let parent = nodes.get(parentId);
      if (!parent) {
        parent = {
          id: parentId,
          span: virtualSpan(parentId, node.span),
          children: [],
          parent: null,
          virtual: true,
        };
        nodes.set(parentId, parent);
        virtuals.push(parent);
        roots.push(parent);
        diagnostics.add(
          "missing_parent",
          "info",
          `parent ${parentId} of span "${node.span.name}" is not in the input`,
          {
            spanId: node.id,
            spanName: node.span.name,
            details: { parentId },
          },
        );
      }
      node.parent = parent;
      parent.children.push(node);
    }
    for (const v of virtuals) fitTimes(v);

    // Parent links that loop never reach a root: cut each cycle where it is first found.
    const reachable = new Set<TraceNode>();
    const mark = (start: TraceNode) => {
      const stack = [start];
      while (stack.length) {
        const n = stack.pop()!;
        if (reachable.has(n)) continue;
        reachable.add(n);
        for (const c of n.children) stack.push(c);
      }
    };
    for (const r of roots) mark(r);
    for (const node of ordered) {
      if (reachable.has(node)) continue;
      diagnostics.add(
        "parent_cycle",
        "warning",
        `span "${node.span.name}" is in a parent cycle; made it a root`,
        {
          spanId: node.id,
          spanName: node.span.name,
        },
      );
      const siblings = node.parent!.children;
      siblings.splice(siblings.indexOf(node), 1);
      node.parent = null;
      roots.push(node);
      mark(node);
    }

    let root: TraceNode;
    if (roots.length === 1) root = roots[0]!;
    else {
      diagnostics.add("virtual_root", "info", `${roots.length} root spans; joined under a virtual root`, {
        details: { roots: roots.map((r) => r.span.name) },
      });
      root = {
        id: VIRTUAL_ROOT_ID,
        span: virtualSpan(VIRTUAL_ROOT_ID, roots[0]!.span),
        children: roots,
        parent: null,
        virtual: true,
      };
      root.span.span_id = VIRTUAL_ROOT_ID;
      for (const r of roots) r.parent = root;
      fitTimes(root);
      nodes.set(VIRTUAL_ROOT_ID, root);
    }
    return new TraceTree(root, nodes);
  }

  /** Pre-order depth-first walk; `visit` returning false skips the node's subtree. */
  walk(visit: (node: TraceNode, depth: number) => boolean | undefined): void {
    const stack: Array<[TraceNode, number]> = [[this.root, 0]];
    while (stack.length) {
      const [node, depth] = stack.pop()!;
      if (visit(node, depth) === false) continue;
      for (let i = node.children.length - 1; i >= 0; i--) stack.push([node.children[i]!, depth + 1]);
    }
  }

  /** Every node in pre-order. */
  preorder(): TraceNode[] {
    const out: TraceNode[] = [];
    this.walk((n) => {
      out.push(n);
      return true;
    });
    return out;
  }

  /**
   * Re-parent spans by time containment (Agent Lightning's `repair_hierarchy`): below the first node
   * with more than one child, each direct child moves under the tightest other descendant whose
   * time range encloses it. Instrumentations that lose async context produce such flat trees.
   */
  repairHierarchy(diagnostics = new DiagnosticsCollector()): this {
    let top = this.root;
    while (top.children.length === 1) top = top.children[0]!;
    for (const child of top.children.slice()) {
      const start = child.span.start_time;
      const end = child.span.end_time;
      if (start == null || end == null) continue;
      let best: TraceNode | null = null;
      let bestSlack = Number.POSITIVE_INFINITY;
      const stack = top.children.slice();
      while (stack.length) {
        const candidate = stack.pop()!;
        if (candidate === child) continue; // neither X nor X's own subtree may adopt X
        for (const c of candidate.children) stack.push(c);
        const cs = candidate.span.start_time;
        const ce = candidate.span.end_time;
        if (cs == null || ce == null || cs > start || ce < end) continue;
        const slack = ce - end + (start - cs);
        if (slack > 0 && slack < bestSlack) {
          best = candidate;
          bestSlack = slack;
        }
      }
      if (!best) continue;
      top.children.splice(top.children.indexOf(child), 1);
      child.parent = best;
      best.children.push(child);
      diagnostics.add(
        "reparented",
        "info",
        `moved "${child.span.name}" under "${best.span.name}" (time containment)`,
        {
          spanId: child.id,
          spanName: child.span.name,
          details: { newParent: best.id },
        },
      );
    }
    return this;
  }
}

function virtualSpan(id: string, like: Span): Span {
  return {
    rollout_id: like.rollout_id,
    attempt_id: like.attempt_id,
    sequence_id: like.sequence_id,
    trace_id: like.trace_id,
    span_id: id,
    parent_id: null,
    name: VIRTUAL_SPAN_NAME,
    status: { status_code: "OK", description: null },
    attributes: {},
    events: [],
    links: [],
    start_time: null,
    end_time: null,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

/** A virtual node spans its children (computed bottom-up so nested virtual nodes work). */
function fitTimes(node: TraceNode): void {
  let start = Number.POSITIVE_INFINITY;
  let end = Number.NEGATIVE_INFINITY;
  for (const c of node.children) {
    if (c.virtual) fitTimes(c);
    if (c.span.start_time != null) start = Math.min(start, c.span.start_time);
    if (c.span.end_time != null) end = Math.max(end, c.span.end_time);
  }
  node.span.start_time = Number.isFinite(start) ? start : null;
  node.span.end_time = Number.isFinite(end) ? end : null;
}
