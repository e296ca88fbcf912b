/** Handing out span sequence ids reserved in blocks, one block per rollout (shared by the durable stores). */
import { capSequenceId } from "@agl/core";

/** How many sequence ids each rollout of `pairs` needs, so one statement per rollout can reserve its block. */
export function sequenceCounts(pairs: ReadonlyArray<readonly [string, string]>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const [rid] of pairs) counts.set(rid, (counts.get(rid) ?? 0) + 1);
  return counts;
}

/** Hand out the reserved blocks (first id per rollout) in request order, capped at MAX_SPAN_SEQUENCE_ID. */
export function handOutSequences(
  pairs: ReadonlyArray<readonly [string, string]>,
  firsts: Map<string, number>,
): number[] {
  const next = new Map(firsts);
  return pairs.map(([rid]) => {
    const value = next.get(rid)!;
    next.set(rid, value + 1);
    return capSequenceId(value);
  });
}
