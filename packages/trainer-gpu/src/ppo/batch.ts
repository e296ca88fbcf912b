import type { SeededRandom } from "./rng.js";
import type { TrainRow } from "./triplet-rows.js";

/**
 * Selection and tensor layouts of a PPO batch.
 *
 * `padBatch` gives VERL's layout (prompts left-padded, responses right-padded, concatenated, with
 * attention mask and position ids). The model, however, is trained in a "packed" layout
 * (`packBatch`): each row is prompt ++ response starting at position 0 and right-padded, so a
 * causal model needs no attention mask or position offsets and computes exactly the log-probs the
 * server computed while sampling. Every per-token training quantity lives in that layout, indexed by
 * the position whose logits predict the token (t predicts ids[t + 1]).
 */

export interface SelectOptions {
  /** Rows per mini-batch; the kept rows are floored to a multiple of it. */
  miniBatchRows: number;
  /** uids whose rows to leave out (zero-variance groups, when skipping them). */
  skipUids?: ReadonlySet<string>;
  /**
   * uids whose rows go first when the rows are floored to a multiple of the mini-batch (zero-variance
   * groups: they carry no policy-gradient signal), as Agent Lightning v1.0 trims its batches.
   */
  trimFirstUids?: ReadonlySet<string>;
  rng: SeededRandom;
  shuffle: boolean;
}

export interface SelectStats {
  n_rows_dropped_prompt_too_long: number;
  n_rows_skipped_zero_variance: number;
  n_triplets_dropped_remainder: number;
  n_rows_trained: number;
}

/**
 * Drop the `isDrop` rows and skipped groups, shuffle, and floor to a multiple of the mini-batch
 * size, dropping `trimFirstUids` rows before others. When fewer rows than one mini-batch remain they
 * are all kept as a single (smaller) mini-batch rather than thrown away.
 */
export function selectRows(
  rows: readonly TrainRow[],
  options: SelectOptions,
): { rows: TrainRow[]; stats: SelectStats } {
  const kept = rows.filter((r) => !r.isDrop);
  const droppedLong = rows.length - kept.length;
  const useful = options.skipUids ? kept.filter((r) => !options.skipUids!.has(r.uid)) : kept;
  const skipped = kept.length - useful.length;
  const shuffled = options.shuffle ? options.rng.shuffle([...useful]) : [...useful];
  const size = options.miniBatchRows;
  const keep = shuffled.length < size ? shuffled.length : shuffled.length - (shuffled.length % size);
  let ordered = shuffled;
  if (keep < shuffled.length && options.trimFirstUids?.size) {
    // Move the rows to trim first to the end (stable, so the shuffle's order is otherwise kept).
    const last = options.trimFirstUids;
    ordered = [...shuffled.filter((r) => !last.has(r.uid)), ...shuffled.filter((r) => last.has(r.uid))];
  }
  return {
    rows: ordered.slice(0, keep),
    stats: {
      n_rows_dropped_prompt_too_long: droppedLong,
      n_rows_skipped_zero_variance: skipped,
      n_triplets_dropped_remainder: ordered.length - keep,
      n_rows_trained: keep,
    },
  };
}

export interface PaddedBatch {
  batchSize: number;
  promptLength: number;
  responseLength: number;
  /** [B, P], left-padded. */
  prompts: number[][];
  /** [B, R], right-padded. */
  responses: number[][];
  /** [B, P + R]. */
  inputIds: number[][];
  attentionMask: number[][];
  positionIds: number[][];
  /** [B, R]: 1 on trained (generated) tokens. */
  responseMask: number[][];
  /** [B, R]: the score at the last trained token. */
  tokenLevelScores: number[][];
}

/** VERL's padded view. `padId` fills the padding. */
export function padBatch(rows: readonly TrainRow[], padId: number): PaddedBatch {
  const P = Math.max(0, ...rows.map((r) => r.promptIds.length));
  const R = Math.max(0, ...rows.map((r) => r.responseIds.length));
  const prompts = rows.map((r) => [...new Array(P - r.promptIds.length).fill(padId), ...r.promptIds]);
  const responses = rows.map((r) => [...r.responseIds, ...new Array(R - r.responseIds.length).fill(padId)]);
  const attentionMask = rows.map((r) => [
    ...new Array(P - r.promptIds.length).fill(0),
    ...new Array(r.promptIds.length).fill(1),
    ...new Array(r.responseIds.length).fill(1),
    ...new Array(R - r.responseIds.length).fill(0),
  ]);
  const positionIds = attentionMask.map((mask) => {
    let c = 0;
    return mask.map((m) => {
      c += m;
      return Math.max(c - 1, 0);
    });
  });
  const responseMask = rows.map((r) => [...r.responseMask, ...new Array(R - r.responseMask.length).fill(0)]);
  const tokenLevelScores = responseMask.map((mask, i) => {
    const out = new Array<number>(R).fill(0);
    const last = mask.lastIndexOf(1);
    if (last >= 0) out[last] = rows[i]!.score;
    return out;
  });
  return {
    batchSize: rows.length,
    promptLength: P,
    responseLength: R,
    prompts,
    responses,
    inputIds: prompts.map((p, i) => [...p, ...responses[i]!]),
    attentionMask,
    positionIds,
    responseMask,
    tokenLevelScores,
  };
}

export interface PackedBatch {
  batchSize: number;
  /** Sequence length L (longest prompt + response in the batch). */
  length: number;
  /** [B, L] token ids, right-padded with padId. */
  ids: number[][];
  /** [B, L - 1]: the token predicted at each position (ids shifted left). */
  targets: number[][];
  /** [B, L - 1]: 1 where the target is a trained response token. */
  mask: number[][];
  /** [B]: where each row's response starts in target space (promptLength - 1). */
  responseStart: number[];
}

export function packBatch(rows: readonly TrainRow[], padId: number): PackedBatch {
  const L = Math.max(2, ...rows.map((r) => r.promptIds.length + r.responseIds.length));
  const ids = rows.map((r) => {
    const seq = [...r.promptIds, ...r.responseIds];
    return [...seq, ...new Array(L - seq.length).fill(padId)];
  });
  const targets = ids.map((row) => row.slice(1));
  const responseStart = rows.map((r) => r.promptIds.length - 1);
  const mask = rows.map((r, i) => {
    const out = new Array<number>(L - 1).fill(0);
    r.responseMask.forEach((m, j) => {
      out[responseStart[i]! + j] = m;
    });
    return out;
  });
  return { batchSize: rows.length, length: L, ids, targets, mask, responseStart };
}

/** Move per-response-token values `[B][R_i]` into target space `[B][L - 1]` (zeros elsewhere). */
export function toPacked(packed: PackedBatch, perResponse: readonly (readonly number[])[]): number[][] {
  return perResponse.map((values, i) => {
    const out = new Array<number>(packed.length - 1).fill(0);
    values.forEach((v, j) => {
      out[packed.responseStart[i]! + j] = v;
    });
    return out;
  });
}

/** Read per-target-position values back into per-response-token arrays of the given lengths. */
export function fromPacked(
  packed: PackedBatch,
  values: readonly (readonly number[])[],
  lengths: number[],
): number[][] {
  return values.map((row, i) => row.slice(packed.responseStart[i]!, packed.responseStart[i]! + lengths[i]!));
}
