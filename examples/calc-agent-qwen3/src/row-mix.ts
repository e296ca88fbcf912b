/**
 * The mixed short/full-row curriculum of SFT (`sftToPlateau`'s short phase and src/sft-probe.ts): the first
 * `shortSteps` steps train on the demonstrations rendered without the tool preamble (short rows, where the
 * copying of numbers forms for a third of the compute) with a share of full rows mixed in, so that the
 * copying is also used in the served context from step 0. The share moves linearly from `fullShare` to
 * `fullShareEnd` over the short phase, changing once per chunk of `every` steps.
 */
export interface RowMix {
  /** Steps of the short phase. */
  shortSteps: number;
  /** Expected share of full rows per batch at the first chunk of the short phase (0: short rows only). */
  fullShare: number;
  /** ...and at its last chunk. */
  fullShareEnd: number;
}

/** The share of full rows for the chunk that starts at `step` (< `mix.shortSteps`), chunks of `every`. */
export function fullShareAt(mix: RowMix, step: number, every: number): number {
  const span = Math.max(1, mix.shortSteps - every);
  return mix.fullShare + ((mix.fullShareEnd - mix.fullShare) * Math.min(step, span)) / span;
}

/**
 * The rows a chunk samples from: all `short` rows plus enough `full` ones for a share `share` of full rows
 * in expectation per batch. The full rows are a window of `full` rotated by `step * batch`, so successive
 * chunks see different ones.
 */
export function mixRows<T>(
  short: readonly T[],
  full: readonly T[],
  share: number,
  step: number,
  batch: number,
): T[] {
  if (!(share >= 0 && share < 1)) throw new RangeError(`full-row share must be in [0, 1), got ${share}`);
  if (share === 0 || full.length === 0) return [...short];
  const count = Math.min(full.length, Math.round((share / (1 - share)) * short.length));
  const from = (step * batch) % full.length;
  const rotated = [...full.slice(from), ...full.slice(0, from)];
  return [...short, ...rotated.slice(0, count)];
}
