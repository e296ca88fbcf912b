import { lengthBalancedMicroBatches } from "../model/micro-batches.js";

/**
 * Micro-batches of PPO rows that keep rows with the same prompt together (a GRPO group's rollouts), so a
 * model that shares a common prefix (`PretrainedModel.sharePrefix`) runs each prompt once per micro-batch
 * rather than once per row. Any split gives the same loss and gradient — the aggregation weights are fixed
 * over the whole mini-batch before it is split, and micro-batch gradients are summed — so only the work
 * changes. As many micro-batches as `lengthBalancedMicroBatches` would give (`ceil(n / maxRows)`, none over
 * `maxRows` rows); without repeated prompts it is that length-balanced split. Deterministic.
 */
export function promptMicroBatches(
  rows: ReadonlyArray<{ readonly promptIds: readonly number[]; readonly responseIds: readonly number[] }>,
  maxRows: number,
): number[][] {
  const lengths = rows.map((r) => r.promptIds.length + r.responseIds.length);
  const groups = new Map<string, number[]>();
  rows.forEach((r, i) => {
    const key = r.promptIds.join(",");
    const g = groups.get(key);
    if (g) g.push(i);
    else groups.set(key, [i]);
  });
  if (groups.size === rows.length || !(maxRows >= 1)) return lengthBalancedMicroBatches(lengths, maxRows);
  const longest = (g: number[]) => Math.max(...g.map((i) => lengths[i]!));
  // Groups with the longest rows first (then in arrival order); within a group, longest rows first.
  const order = [...groups.values()]
    .sort((a, b) => longest(b) - longest(a) || a[0]! - b[0]!)
    .flatMap((g) => [...g].sort((a, b) => lengths[b]! - lengths[a]! || a - b));
  const size = Math.max(1, Math.floor(maxRows));
  const out: number[][] = [];
  for (let k = 0; k < order.length; k += size) out.push(order.slice(k, k + size).sort((a, b) => a - b));
  return out;
}
