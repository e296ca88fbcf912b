import { rewardOf } from "./conventions.js";
import type { DiagnosticsCollector } from "./diagnostics.js";
import type { AnalyzedCall } from "./trace-to-triplets.js";
import type { TraceNode, TraceTree } from "./tree.js";

/**
 * - `firstOccurrence`: walking all spans by start time, each reward goes to the newest call seen so
 *   far that ended before the reward started and has no reward yet.
 * - `firstSibling`: the same rule, applied separately within each span's direct children.
 */
export type RewardMatchPolicy = "firstOccurrence" | "firstSibling";

export interface RewardMatch {
  node: TraceNode;
  value: number;
  /** The call that received it, or null. */
  call: AnalyzedCall | null;
}

export function matchRewards(
  tree: TraceTree,
  kept: AnalyzedCall[],
  policy: RewardMatchPolicy,
  diagnostics: DiagnosticsCollector,
  clockSkewSeconds = 0,
): RewardMatch[] {
  const byNode = new Map<TraceNode, AnalyzedCall>();
  for (const c of kept) byNode.set(c.node, c);
  const matches: RewardMatch[] = [];
  const assign = (ordered: TraceNode[], scope: string) => {
    const seen: AnalyzedCall[] = [];
    for (const node of ordered) {
      const call = byNode.get(node);
      if (call) {
        seen.push(call);
        continue;
      }
      if (node.virtual) continue;
      const value = rewardOf(node.span);
      if (value === null) continue;
      const start = node.span.start_time;
      let target: AnalyzedCall | null = null;
      if (start != null) {
        for (let i = seen.length - 1; i >= 0; i--) {
          const candidate = seen[i]!;
          const end = candidate.node.span.end_time;
          if (candidate.reward === null && end != null && end <= start + clockSkewSeconds) {
            target = candidate;
            break;
          }
        }
      }
      if (target) target.reward = value;
      else explainUnmatched(node, value, seen, scope, diagnostics);
      matches.push({ node, value, call: target });
    }
  };

  if (policy === "firstOccurrence") {
    assign(byStart([...tree.nodes.values()]), "trace");
  } else {
    for (const node of tree.nodes.values()) {
      if (node.children.length > 0) assign(byStart(node.children), `children of "${node.span.name}"`);
    }
    // A reward span at the root level (several roots join under the virtual root) is covered above;
    // the root itself is nobody's child, so a reward on it cannot match under this policy.
    const rootReward = rewardOf(tree.root.span);
    if (!tree.root.virtual && rootReward !== null) {
      matches.push({ node: tree.root, value: rootReward, call: null });
      explainUnmatched(tree.root, rootReward, [], "the root (it has no siblings)", diagnostics);
    }
  }
  return matches;
}

/** Stable sort by start time; spans without one go last (they cannot be placed in time). */
function byStart(nodes: TraceNode[]): TraceNode[] {
  return nodes
    .map((node, index) => ({ node, index }))
    .sort((a, b) => {
      const sa = a.node.span.start_time ?? Number.POSITIVE_INFINITY;
      const sb = b.node.span.start_time ?? Number.POSITIVE_INFINITY;
      return sa - sb || a.index - b.index;
    })
    .map((x) => x.node);
}

function explainUnmatched(
  node: TraceNode,
  value: number,
  seen: AnalyzedCall[],
  scope: string,
  diagnostics: DiagnosticsCollector,
): void {
  let why: string;
  if (node.span.start_time == null) why = "the reward span has no start time";
  else if (seen.length === 0) why = `no kept LLM call precedes it among ${scope}`;
  else if (seen.every((c) => c.reward !== null))
    why = `every earlier call among ${scope} already has a reward`;
  else why = `no earlier call among ${scope} had ended when the reward started`;
  diagnostics.add(
    "reward_unmatched",
    "warning",
    `reward ${value} from "${node.span.name}" matched no call: ${why}`,
    {
      spanId: node.id,
      spanName: node.span.name,
      details: { value },
    },
  );
}
