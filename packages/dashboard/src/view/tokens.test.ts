import { TripletsToTrajectories } from "@agl/adapter";
import type { Triplet } from "@agl/core";
import { describe, expect, it } from "vitest";
import { countRoles, sequenceTokens, tripletTokens } from "./tokens.js";

const triplet = (prompt: number[], response: number[], reward: number | null = null): Triplet => ({
  prompt: { token_ids: prompt },
  response: { token_ids: response, logprobs: response.map((_, i) => -i / 10) },
  reward,
  metadata: {},
});

describe("token views", () => {
  it("shows a triplet's prompt then response ids, each response token with its logprob", () => {
    const cells = tripletTokens(triplet([1, 2, 3], [7, 8]));
    expect(cells.map((c) => [c.id, c.role, c.mask, c.logprob])).toEqual([
      [1, "prompt", null, null],
      [2, "prompt", null, null],
      [3, "prompt", null, null],
      [7, "response", 1, -0],
      [8, "response", 1, -0.1],
    ]);
  });

  it("shows a merged trajectory row with the inserted observation tokens at mask 0", () => {
    // call 2's prompt = call 1's prompt + response + observation [50, 51]
    const rows = new TripletsToTrajectories().adapt([
      triplet([1, 2], [3, 4]),
      triplet([1, 2, 3, 4, 50, 51], [5], 1),
    ]);
    expect(rows).toHaveLength(1);
    const cells = sequenceTokens(rows[0]!);
    expect(cells.map((c) => `${c.id}:${c.role}`)).toEqual([
      "1:prompt",
      "2:prompt",
      "3:response",
      "4:response",
      "50:observation",
      "51:observation",
      "5:response",
    ]);
    expect(
      cells.filter((c) => c.role === "observation").every((c) => c.mask === 0 && c.logprob === null),
    ).toBe(true);
    expect(countRoles(cells)).toEqual({ prompt: 2, response: 3, observation: 2 });
  });

  it("copes with triplets that have no token ids", () => {
    expect(
      tripletTokens({ prompt: {}, response: null, reward: null, metadata: {} } as unknown as Triplet),
    ).toEqual([]);
  });
});
