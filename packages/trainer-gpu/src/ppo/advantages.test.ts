import { describe, expect, it } from "vitest";
import {
  computeAdvantages,
  gaeAdvantages,
  grpoAdvantages,
  reinforcePlusPlusAdvantages,
  rlooAdvantages,
  tokenLevelRewards,
  zeroVarianceGroups,
} from "./advantages.js";

const close = (a: number[], b: number[], digits = 5) => {
  for (const [i, v] of a.entries()) expect(v).toBeCloseTo(b[i]!, digits);
};

describe("outcome estimators", () => {
  it("GRPO normalises within each data_id group by mean and unbiased std", () => {
    const adv = grpoAdvantages([1, 0, 1, 1], ["a", "a", "b", "b"]);
    close(adv, [Math.SQRT1_2, -Math.SQRT1_2, 0, 0]);
    close(grpoAdvantages([1, 0, 1, 1], ["a", "a", "b", "b"], { normByStd: false }), [0.5, -0.5, 0, 0]);
  });

  it("GRPO treats a group of one as mean 0, std 1", () => {
    close(grpoAdvantages([2], ["x"]), [2 / (1 + 1e-6)]);
  });

  it("RLOO subtracts the mean of the other members", () => {
    close(rlooAdvantages([1, 0, 0, 5], ["g", "g", "g", "h"]), [1, -0.5, -0.5, 5]);
  });
});

describe("token-level estimators", () => {
  it("REINFORCE++ returns-to-go reset at masked tokens, whitened over the batch", () => {
    const adv = reinforcePlusPlusAdvantages(
      [
        [0, 0, 1],
        [0, 2, 0],
      ],
      [
        [1, 1, 1],
        [1, 1, 0],
      ],
      1,
    );
    // returns [1,1,1] and [2,2,-]; mean 1.4, unbiased var 0.3
    const s = Math.sqrt(0.3 + 1e-8);
    close(adv[0]!, [-0.4 / s, -0.4 / s, -0.4 / s]);
    close(adv[1]!, [0.6 / s, 0.6 / s, 0]);
  });

  it("GAE matches the hand-computed recursion and returns", () => {
    const { advantages, returns } = gaeAdvantages([[0, 0, 1]], [[0.5, 0.5, 0.5]], [[1, 1, 1]], 0.5, 0.5);
    close(returns[0]!, [0.21875, 0.375, 1.0]);
    const raw = [-0.28125, -0.125, 0.5];
    const m = raw.reduce((a, b) => a + b) / 3;
    const sd = Math.sqrt(raw.reduce((a, b) => a + (b - m) ** 2, 0) / 2 + 1e-8);
    close(
      advantages[0]!,
      raw.map((x) => (x - m) / sd),
    );
  });

  it("GAE skips observation tokens (mask 0), carrying value and estimate across them", () => {
    const { returns } = gaeAdvantages([[0, 0, 1]], [[0.5, 9, 0.5]], [[1, 0, 1]], 1, 1);
    // raw advantages are [.5, .5, .5]: the observation's value 9 never enters the recursion
    close(returns[0]!, [1, 9.5, 1]);
  });

  it("puts the score at the last masked-in token", () => {
    expect(tokenLevelRewards([3], [[1, 0, 1, 0]])).toEqual([[0, 0, 3, 0]]);
  });
});

describe("computeAdvantages", () => {
  it("rollout-level GRPO counts rollouts, not rows, and broadcasts over each row's mask", () => {
    // rollout r1 (uid u) produced 3 rows, r2 (uid u) one row: row-level stats would be skewed.
    const rows = [
      { uid: "u", rolloutId: "r1", score: 1 },
      { uid: "u", rolloutId: "r1", score: 1 },
      { uid: "u", rolloutId: "r1", score: 1 },
      { uid: "u", rolloutId: "r2", score: 0 },
    ];
    const mask = [
      [1, 1],
      [1, 0],
      [0, 1],
      [1, 1],
    ];
    const out = computeAdvantages({
      estimator: "grpo",
      rows,
      mask,
      gamma: 1,
      lam: 1,
      normByStd: true,
      rolloutLevel: true,
    });
    const a = 0.5 / (Math.SQRT1_2 + 1e-6);
    close(out.advantages.flat(), [a, a, a, 0, 0, a, -a, -a]);
    const rowLevel = computeAdvantages({
      estimator: "grpo",
      rows,
      mask,
      gamma: 1,
      lam: 1,
      normByStd: false,
      rolloutLevel: false,
    });
    close(rowLevel.advantages[0]!, [0.25, 0.25]);
  });

  it("rejects a rollout whose rows disagree on the score", () => {
    expect(() =>
      computeAdvantages({
        estimator: "rloo",
        rows: [
          { uid: "u", rolloutId: "r", score: 1 },
          { uid: "u", rolloutId: "r", score: 0 },
        ],
        mask: [[1], [1]],
        gamma: 1,
        lam: 1,
        normByStd: true,
        rolloutLevel: true,
      }),
    ).toThrow(/different uid\/score/);
  });

  it("GAE needs values", () => {
    expect(() =>
      computeAdvantages({
        estimator: "gae",
        rows: [{ uid: "u", rolloutId: "r", score: 1 }],
        mask: [[1]],
        gamma: 1,
        lam: 1,
        normByStd: true,
        rolloutLevel: true,
      }),
    ).toThrow(/values/);
  });

  it("finds zero-variance groups", () => {
    const z = zeroVarianceGroups([
      { uid: "a", rolloutId: "1", score: 1 },
      { uid: "a", rolloutId: "2", score: 1 },
      { uid: "b", rolloutId: "3", score: 1 },
      { uid: "b", rolloutId: "4", score: 0 },
    ]);
    expect([...z]).toEqual(["a"]);
  });
});
