import { describe, expect, it } from "vitest";
import { packBatch, padBatch, selectRows, toPacked } from "./batch.js";
import { SeededRandom } from "./rng.js";
import { finalTripletReward, rowsFromRollouts, type TrainRow } from "./triplet-rows.js";

const t = (prompt: number[], response: number[], reward: number | null = null, logprobs?: number[]) => ({
  prompt: { token_ids: prompt },
  response: { token_ids: response, ...(logprobs ? { logprobs } : {}) },
  reward,
  metadata: {},
});

describe("rows from triplets", () => {
  it("final reward is the last non-null triplet reward, else 0", () => {
    expect(finalTripletReward([t([1], [2], 0.5), t([1], [2], null)])).toBe(0.5);
    expect(finalTripletReward([t([1], [2], 0.5), t([1], [2], 2)])).toBe(2);
    expect(finalTripletReward([t([1], [2])])).toBe(0);
  });

  it("transition mode: one row per call, long prompts marked isDrop, long responses truncated and counted", () => {
    const { rows, stats } = rowsFromRollouts(
      [
        {
          rolloutId: "r1",
          uid: "d1",
          triplets: [t([1, 2, 3], [4, 5], null, [-0.1, -0.2]), t([1, 2, 3, 4, 5, 6], [7, 8, 9, 10], 1)],
        },
        {
          rolloutId: "r2",
          uid: "d1",
          triplets: [t([1, 2, 3, 4, 5], [6], 0), { prompt: {}, response: {}, reward: null, metadata: {} }],
        },
      ],
      { level: "transition", maxPromptLength: 5, maxResponseLength: 3 },
    );
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatchObject({
      score: 1,
      isDrop: false,
      responseIds: [4, 5],
      rolloutLogprobs: [-0.1, -0.2],
    });
    expect(rows[1]).toMatchObject({
      score: 1,
      isDrop: true,
      promptIds: [1, 2, 3, 4, 5],
      responseIds: [7, 8, 9],
      responseMask: [1, 1, 1],
      responseTruncated: true,
      rolloutLogprobs: null,
    });
    expect(rows[2]).toMatchObject({ score: 0, isDrop: false, uid: "d1", rolloutId: "r2" });
    expect(stats).toEqual({
      n_triplets: 4,
      n_triplets_without_tokens: 1,
      n_triplets_prompt_too_long: 1,
      n_trunc_sample_because_of_response: 1,
      n_trajectory_prefix_mismatch: 0,
    });
  });

  it("trajectory mode merges prefix-extending turns with observation tokens masked out", () => {
    const { rows, stats } = rowsFromRollouts(
      [
        {
          rolloutId: "r",
          uid: "d",
          triplets: [
            t([1, 2], [3, 4], null, [-1, -2]),
            // extends [1,2,3,4] with the observation [9, 9]
            t([1, 2, 3, 4, 9, 9], [5], null, [-3]),
            // does not extend: a new row
            t([7], [8], 1),
          ],
        },
      ],
      { level: "trajectory", maxPromptLength: 8, maxResponseLength: 8 },
    );
    expect(stats.n_trajectory_prefix_mismatch).toBe(1);
    expect(rows.map((r) => [r.promptIds, r.responseIds, r.responseMask, r.rolloutLogprobs, r.score])).toEqual(
      [
        [[1, 2], [3, 4, 9, 9, 5], [1, 1, 0, 0, 1], [-1, -2, 0, 0, -3], 1],
        [[7], [8], [1], null, 1],
      ],
    );
  });

  it("trajectory rows lose their log-probs when any turn lacks them; truncation keeps masks aligned", () => {
    const { rows, stats } = rowsFromRollouts(
      [{ rolloutId: "r", uid: "d", triplets: [t([1], [2], null, [-1]), t([1, 2, 3], [4, 5], 1)] }],
      { level: "trajectory", maxPromptLength: 8, maxResponseLength: 3 },
    );
    expect(rows[0]!.rolloutLogprobs).toBeNull();
    expect(rows[0]!.responseIds).toEqual([2, 3, 4]);
    expect(rows[0]!.responseMask).toEqual([1, 0, 1]);
    expect(stats.n_trunc_sample_because_of_response).toBe(1);
  });
});

const row = (uid: string, prompt: number[], response: number[], extra: Partial<TrainRow> = {}): TrainRow => ({
  rolloutId: `${uid}-${prompt.join("")}`,
  uid,
  score: 1,
  promptIds: prompt,
  responseIds: response,
  responseMask: response.map(() => 1),
  rolloutLogprobs: null,
  isDrop: false,
  responseTruncated: false,
  ...extra,
});

describe("batch layouts", () => {
  it("VERL view: left-padded prompts, right-padded responses, position ids, reward at last token", () => {
    const b = padBatch([row("a", [1, 2], [3]), row("b", [4], [5, 6], { responseMask: [1, 0], score: 2 })], 0);
    expect(b.prompts).toEqual([
      [1, 2],
      [0, 4],
    ]);
    expect(b.responses).toEqual([
      [3, 0],
      [5, 6],
    ]);
    expect(b.attentionMask).toEqual([
      [1, 1, 1, 0],
      [0, 1, 1, 1],
    ]);
    expect(b.positionIds).toEqual([
      [0, 1, 2, 2],
      [0, 0, 1, 2],
    ]);
    expect(b.responseMask).toEqual([
      [1, 0],
      [1, 0],
    ]);
    expect(b.tokenLevelScores).toEqual([
      [1, 0],
      [2, 0],
    ]);
  });

  it("packed view: prompt++response from position 0, targets shifted, mask on response targets", () => {
    const p = packBatch([row("a", [1, 2], [3]), row("b", [4], [5, 6], { responseMask: [1, 0] })], 0);
    expect(p.ids).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(p.targets).toEqual([
      [2, 3],
      [5, 6],
    ]);
    expect(p.mask).toEqual([
      [0, 1],
      [1, 0],
    ]);
    expect(toPacked(p, [[7], [8, 9]])).toEqual([
      [0, 7],
      [8, 9],
    ]);
  });
});

describe("row selection", () => {
  const rows = [
    row("a", [1], [1]),
    row("a", [2], [1]),
    row("b", [3], [1]),
    row("b", [4], [1]),
    row("c", [5], [1], { isDrop: true }),
    row("d", [6], [1]),
    row("d", [7], [1]),
  ];
  it("drops isDrop rows and skipped groups, floors to the mini-batch multiple and reports counts", () => {
    const { rows: kept, stats } = selectRows(rows, {
      miniBatchRows: 3,
      skipUids: new Set(["b"]),
      rng: new SeededRandom(1),
      shuffle: true,
    });
    expect(kept).toHaveLength(3);
    expect(kept.every((r) => r.uid === "a" || r.uid === "d")).toBe(true);
    expect(stats).toEqual({
      n_rows_dropped_prompt_too_long: 1,
      n_rows_skipped_zero_variance: 2,
      n_triplets_dropped_remainder: 1,
      n_rows_trained: 3,
    });
  });
  it("trims zero-variance groups' rows first when flooring to the mini-batch multiple", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const { rows: kept, stats } = selectRows(rows, {
        miniBatchRows: 4,
        trimFirstUids: new Set(["b"]),
        rng: new SeededRandom(seed),
        shuffle: true,
      });
      // 6 usable rows floor to 4: both "b" rows go, whatever the shuffle.
      expect(kept.map((r) => r.uid).sort()).toEqual(["a", "a", "d", "d"]);
      expect(stats.n_triplets_dropped_remainder).toBe(2);
      expect(stats.n_rows_skipped_zero_variance).toBe(0);
    }
  });
  it("keeps a short batch whole as one smaller mini-batch", () => {
    const { rows: kept } = selectRows(rows, { miniBatchRows: 64, rng: new SeededRandom(1), shuffle: false });
    expect(kept).toHaveLength(6);
  });
  it("shuffles deterministically for a seed", () => {
    const a = selectRows(rows, { miniBatchRows: 2, rng: new SeededRandom(7), shuffle: true }).rows.map(
      (r) => r.rolloutId,
    );
    const b = selectRows(rows, { miniBatchRows: 2, rng: new SeededRandom(7), shuffle: true }).rows.map(
      (r) => r.rolloutId,
    );
    expect(a).toEqual(b);
  });
});
