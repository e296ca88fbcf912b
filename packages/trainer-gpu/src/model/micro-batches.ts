/**
 * Splits a batch of rows into micro-batches of about equal padded size. Every micro-batch is padded to its
 * longest row, so cutting the batch in arrival order pads short rows to the length of whichever long row
 * landed with them; grouping rows of similar length wastes far less. With workers computing micro-batches
 * side by side, the step waits for the largest, so the groups are balanced on padded tokens, not rows.
 *
 * `lengths[i]` is row i's token count. The batch is cut into `ceil(n / maxRows)` micro-batches at most (as
 * many as cutting it into runs of `maxRows` rows would give), each a run of the rows sorted by length
 * (longest first), with the largest padded size (rows x longest row) as small as such runs allow; so no
 * micro-batch is larger than `maxRows` rows of the longest row. A micro-batch of short rows may hold more
 * than `maxRows` of them. Returns row indices, ascending within a micro-batch, the micro-batch with the
 * longest rows first. Deterministic: the same lengths give the same split in any thread.
 */
export function lengthBalancedMicroBatches(lengths: readonly number[], maxRows: number): number[][] {
  const n = lengths.length;
  if (n === 0) return [];
  if (!(maxRows >= 1)) throw new RangeError(`maxRows must be at least 1 (got ${maxRows})`);
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b]! - lengths[a]! || a - b);
  const len = (k: number) => Math.max(1, lengths[order[k]!]!);
  const limit = Math.ceil(n / maxRows);
  // Greedy runs under a cap on padded size: a run starting at sorted position k (its longest row) takes
  // as many rows as fit under the cap. Fewer runs for a larger cap, so the smallest cap that needs at most
  // `limit` runs is found by bisection.
  const runs = (cap: number): number[] => {
    const starts: number[] = [];
    for (let k = 0; k < n; k += Math.max(1, Math.floor(cap / len(k)))) starts.push(k);
    return starts;
  };
  let lo = len(0);
  let hi = Math.ceil(maxRows) * len(0);
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (runs(mid).length <= limit) hi = mid;
    else lo = mid + 1;
  }
  const starts = runs(hi);
  return starts.map((s, j) => order.slice(s, starts[j + 1] ?? n).sort((a, b) => a - b));
}
