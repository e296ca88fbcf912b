import { InvalidArgumentError } from "@agl/core";
import type { AdvEstimator } from "./config.js";

/**
 * Advantage estimators, as VERL computes them (`verl/trainer/ppo/core_algos.py`), on plain arrays.
 * Token-level inputs are row-major `[rows][tokens]` number arrays with a 0/1 mask of the same shape.
 */

export type TokenMatrix = number[][];

function groupIndices(groups: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  groups.forEach((g, i) => {
    const list = out.get(g);
    if (list) list.push(i);
    else out.set(g, [i]);
  });
  return out;
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

/** Unbiased standard deviation (torch.std), 0 for a single value. */
function std(xs: readonly number[]): number {
  if (xs.length < 2) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1));
}

/**
 * GRPO: `(score - mean(group)) / (std(group) + eps)` per group of equal `groups[i]` (the data_id);
 * without std normalisation just `score - mean`. A group of one has mean 0 and std 1 (as in VERL).
 */
export function grpoAdvantages(
  scores: readonly number[],
  groups: readonly string[],
  options: { normByStd?: boolean; epsilon?: number } = {},
): number[] {
  const { normByStd = true, epsilon = 1e-6 } = options;
  const out = new Array<number>(scores.length);
  for (const idx of groupIndices(groups).values()) {
    const s = idx.map((i) => scores[i]!);
    const m = s.length > 1 ? mean(s) : 0;
    const sd = s.length > 1 ? std(s) : 1;
    for (const i of idx) out[i] = normByStd ? (scores[i]! - m) / (sd + epsilon) : scores[i]! - m;
  }
  return out;
}

/** RLOO: each score minus the mean of the others in its group; a group of one keeps its score. */
export function rlooAdvantages(scores: readonly number[], groups: readonly string[]): number[] {
  const out = new Array<number>(scores.length);
  for (const idx of groupIndices(groups).values()) {
    const n = idx.length;
    const m = mean(idx.map((i) => scores[i]!));
    for (const i of idx) out[i] = n > 1 ? (scores[i]! * n) / (n - 1) - (m * n) / (n - 1) : scores[i]!;
  }
  return out;
}

/** Mean and unbiased variance over the masked entries (VERL masked_mean / masked_var). */
function maskedStats(
  values: TokenMatrix,
  mask: TokenMatrix,
): { mean: number; variance: number; count: number } {
  let sum = 0;
  let count = 0;
  values.forEach((row, i) => {
    row.forEach((v, t) => {
      if (mask[i]![t]) {
        sum += v;
        count += 1;
      }
    });
  });
  if (count === 0) return { mean: 0, variance: 0, count };
  const m = sum / count;
  let sq = 0;
  values.forEach((row, i) => {
    row.forEach((v, t) => {
      if (mask[i]![t]) sq += (v - m) ** 2;
    });
  });
  const variance = count > 1 ? sq / (count - 1) : 0;
  return { mean: m, variance, count };
}

/** `(x - mean) / sqrt(var + 1e-8)` over masked entries, masked positions set to 0. */
export function maskedWhiten(values: TokenMatrix, mask: TokenMatrix): TokenMatrix {
  const { mean: m, variance } = maskedStats(values, mask);
  const scale = 1 / Math.sqrt(variance + 1e-8);
  return values.map((row, i) => row.map((v, t) => (mask[i]![t] ? (v - m) * scale : 0)));
}

/**
 * REINFORCE++ (outcome): discounted returns-to-go of the token rewards, reset after masked-out
 * tokens, then whitened over the whole batch.
 */
export function reinforcePlusPlusAdvantages(
  rewards: TokenMatrix,
  mask: TokenMatrix,
  gamma: number,
): TokenMatrix {
  const returns = rewards.map((row, i) => {
    const out = new Array<number>(row.length).fill(0);
    let running = 0;
    for (let t = row.length - 1; t >= 0; t--) {
      running = row[t]! + gamma * running;
      out[t] = running;
      running *= mask[i]![t]!;
    }
    return out;
  });
  return maskedWhiten(returns, mask);
}

/**
 * GAE over the masked tokens of each row: observation tokens (mask 0) are skipped, carrying the next
 * value and the running estimate across them (VERL's multi-turn variant). Returns the whitened
 * advantages and the (unwhitened) returns = advantages + values used as value targets.
 */
export function gaeAdvantages(
  rewards: TokenMatrix,
  values: TokenMatrix,
  mask: TokenMatrix,
  gamma: number,
  lam: number,
): { advantages: TokenMatrix; returns: TokenMatrix } {
  const raw = rewards.map((row, i) => {
    const adv = new Array<number>(row.length).fill(0);
    let nextValue = 0;
    let lastGae = 0;
    for (let t = row.length - 1; t >= 0; t--) {
      const m = mask[i]![t]!;
      const v = values[i]![t]!;
      const delta = row[t]! + gamma * nextValue - v;
      const gae = delta + gamma * lam * lastGae;
      nextValue = v * m + (1 - m) * nextValue;
      lastGae = gae * m + (1 - m) * lastGae;
      adv[t] = lastGae;
    }
    return adv;
  });
  const returns = raw.map((row, i) => row.map((a, t) => a + values[i]![t]!));
  return { advantages: maskedWhiten(raw, mask), returns };
}

/** Token rewards: the score at the last masked-in token of each row (plus optional per-token terms). */
export function tokenLevelRewards(
  scores: readonly number[],
  mask: TokenMatrix,
  perToken?: TokenMatrix,
): TokenMatrix {
  return mask.map((row, i) => {
    const out = perToken ? perToken[i]!.map((v, t) => v * row[t]!) : new Array<number>(row.length).fill(0);
    const last = row.lastIndexOf(1);
    if (last >= 0) out[last]! += scores[i]!;
    return out;
  });
}

/** Outcome estimators produce one scalar per row; broadcast it over the row's mask. */
export function broadcast(perRow: readonly number[], mask: TokenMatrix): TokenMatrix {
  return mask.map((row, i) => row.map((m) => m * perRow[i]!));
}

export interface AdvantageRow {
  /** The group key: the data_id shared by the n rollouts of one sample. */
  uid: string;
  rolloutId: string;
  /** The rollout's scalar reward (its final reward; every row of a rollout carries the same one). */
  score: number;
}

export interface AdvantageInput {
  estimator: AdvEstimator;
  rows: readonly AdvantageRow[];
  /** 0/1 per token of the response part (generated tokens). */
  mask: TokenMatrix;
  gamma: number;
  lam: number;
  normByStd: boolean;
  rolloutLevel: boolean;
  /** Per-token penalties added to the reward (KL in reward), same shape as mask. */
  tokenPenalty?: TokenMatrix;
  /** Per-token values for GAE. */
  values?: TokenMatrix;
}

export interface AdvantageOutput {
  advantages: TokenMatrix;
  /** Value targets (GAE only). */
  returns: TokenMatrix | null;
  tokenRewards: TokenMatrix;
}

/**
 * Run the configured estimator. With `rolloutLevel` (Agent Lightning v1.0, GRPO/RLOO/REINFORCE++),
 * the estimator sees one representative per rollout, so group statistics count rollouts, not the
 * rows a multi-call rollout produced; the scalar is then broadcast to every row of that rollout.
 */
export function computeAdvantages(input: AdvantageInput): AdvantageOutput {
  const { estimator, rows, mask } = input;
  const scores = rows.map((r) => r.score);
  const tokenRewards = tokenLevelRewards(scores, mask, input.tokenPenalty);
  if (estimator === "gae") {
    if (!input.values)
      throw new InvalidArgumentError("values", "GAE needs per-token values from the value head");
    const { advantages, returns } = gaeAdvantages(tokenRewards, input.values, mask, input.gamma, input.lam);
    return { advantages, returns, tokenRewards };
  }
  if (input.rolloutLevel && !input.tokenPenalty) {
    const reps = new Map<string, { uid: string; score: number; index: number }>();
    rows.forEach((r, i) => {
      const seen = reps.get(r.rolloutId);
      if (!seen) reps.set(r.rolloutId, { uid: r.uid, score: r.score, index: reps.size });
      else if (seen.uid !== r.uid || seen.score !== r.score) {
        throw new InvalidArgumentError(
          `rows[${i}]`,
          `rollout ${r.rolloutId} has rows with different uid/score; rollout-level advantage needs one per rollout`,
        );
      }
    });
    const repList = [...reps.values()];
    const repAdv = outcomeAdvantage(
      estimator,
      repList.map((r) => r.score),
      repList.map((r) => r.uid),
      input,
    );
    const perRow = rows.map((r) => repAdv[reps.get(r.rolloutId)!.index]!);
    return { advantages: broadcast(perRow, mask), returns: null, tokenRewards };
  }
  if (estimator === "reinforce_plus_plus") {
    return {
      advantages: reinforcePlusPlusAdvantages(tokenRewards, mask, input.gamma),
      returns: null,
      tokenRewards,
    };
  }
  // Row-level GRPO/RLOO score each row by its summed token rewards (penalties included).
  const rowScores = tokenRewards.map((row) => row.reduce((a, b) => a + b, 0));
  const perRow = outcomeAdvantage(
    estimator,
    rowScores,
    rows.map((r) => r.uid),
    input,
  );
  return { advantages: broadcast(perRow, mask), returns: null, tokenRewards };
}

function outcomeAdvantage(
  estimator: Exclude<AdvEstimator, "gae">,
  scores: number[],
  uids: string[],
  input: AdvantageInput,
): number[] {
  if (estimator === "grpo") return grpoAdvantages(scores, uids, { normByStd: input.normByStd });
  if (estimator === "rloo") return rlooAdvantages(scores, uids);
  // REINFORCE++ on one-token representatives: the batch-whitened score.
  return reinforcePlusPlusAdvantages(
    scores.map((s) => [s]),
    scores.map(() => [1]),
    input.gamma,
  ).map((r) => r[0]!);
}

/** uids whose rollouts all got the same score (no learning signal under group baselines). */
export function zeroVarianceGroups(rows: readonly AdvantageRow[]): Set<string> {
  const scores = new Map<string, Set<number>>();
  for (const r of rows) {
    const set = scores.get(r.uid) ?? new Set<number>();
    set.add(r.score);
    scores.set(r.uid, set);
  }
  return new Set([...scores].filter(([, s]) => s.size === 1).map(([uid]) => uid));
}
