/** The bookkeeping of the beam search, as pure functions of their inputs and a random source. */

/** A uniform number in [0, 1); `Math.random` or any seeded generator. */
export type RandomSource = () => number;

/** A copy of `items` in random order (Fisher-Yates). */
export function shuffled<T>(items: readonly T[], random: RandomSource): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

/** `k` distinct items drawn at random; all of them (shuffled) when there are no more than `k`. */
export function sample<T>(items: readonly T[], k: number, random: RandomSource): T[] {
  return shuffled(items, random).slice(0, Math.max(0, k));
}

/**
 * Endless batches over a dataset. With a batch at least as large as the dataset every batch is the whole
 * dataset in a new order; otherwise each item appears once per pass (reshuffled per pass), a batch that
 * straddles two passes never holds the same item twice, and an item that had to wait is drawn first next.
 */
export function* batches<T>(dataset: readonly T[], batchSize: number, random: RandomSource): Generator<T[]> {
  if (dataset.length === 0) throw new RangeError("cannot draw batches from an empty dataset");
  if (batchSize >= dataset.length) {
    for (;;) yield shuffled(dataset, random);
  }
  let batch: number[] = [];
  // An item met again while still in the open batch goes to the front of the next pass instead of being lost.
  let carried: number[] = [];
  for (;;) {
    const order = [
      ...carried,
      ...shuffled(
        dataset.map((_, i) => i),
        random,
      ),
    ];
    carried = [];
    for (const index of order) {
      if (batch.includes(index)) {
        carried.push(index);
        continue;
      }
      batch.push(index);
      if (batch.length === batchSize) {
        yield batch.map((i) => dataset[i]!);
        batch = [];
      }
    }
  }
}

/**
 * The parents of one round: `width` members of the beam drawn without replacement, or, while the beam
 * is smaller than `width`, every member repeated in turn until there are `width` parents.
 */
export function sampleParents<T>(beam: readonly T[], width: number, random: RandomSource): T[] {
  if (beam.length === 0) return [];
  if (beam.length < width) return Array.from({ length: width }, (_, i) => beam[i % beam.length]!);
  return sample(beam, width, random);
}

export interface Scored {
  score: number;
}

/**
 * The next beam: the `width` best by score. Ties keep the given order (list the current beam first and
 * an incumbent is kept over a newcomer that only matches it).
 */
export function selectBeam<T extends Scored>(candidates: readonly T[], width: number): T[] {
  return candidates
    .map((c, i) => ({ c, i }))
    .sort((a, b) => b.c.score - a.c.score || a.i - b.i)
    .slice(0, width)
    .map(({ c }) => c);
}

/** Mean reward of a batch; rollouts without a reward (failed, unfinished, none emitted) count as 0. */
export function meanReward(rewards: ReadonlyArray<number | null>, batchSize = rewards.length): number {
  if (batchSize === 0) return 0;
  return rewards.reduce<number>((sum, r) => sum + (r ?? 0), 0) / batchSize;
}
