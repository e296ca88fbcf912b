import type { Triplet } from "@agl/core";
import { describe, expect, it } from "vitest";
import { TripletsToTrajectories } from "./trajectory.js";

const t = (
  prompt: number[],
  response: number[],
  logprobs: number[] | null,
  reward: number | null = null,
): Triplet => ({
  prompt: { token_ids: prompt },
  response: { token_ids: response, logprobs },
  reward,
  metadata: {},
});

describe("TripletsToTrajectories", () => {
  it("merges calls whose prompt extends prompt+response, masking the observation tokens", () => {
    const triplets = [
      t([1, 2], [3, 4], [-0.1, -0.2]),
      // context is [1,2,3,4]; 7,8 are the tool observation the harness inserted
      t([1, 2, 3, 4, 7, 8], [9], [-0.3]),
      t([1, 2, 3, 4, 7, 8, 9, 10], [11, 12], [-0.4, -0.5], 1),
    ];
    const { output, diagnostics } = new TripletsToTrajectories().adaptWithDiagnostics(triplets);
    expect(output).toEqual([
      {
        prompt_token_ids: [1, 2],
        response_token_ids: [3, 4, 7, 8, 9, 10, 11, 12],
        response_mask: [1, 1, 0, 0, 1, 0, 1, 1],
        response_logprobs: [-0.1, -0.2, 0, 0, -0.3, 0, -0.4, -0.5],
        reward: 1,
        triplet_indices: [0, 1, 2],
      },
    ]);
    expect(diagnostics.diagnostics).toEqual([]);
  });

  it("starts a new row at a prefix mismatch and reports the position k", () => {
    const triplets = [
      t([1, 2], [3, 4], [-0.1, -0.2], 0.5),
      // the template re-rendered token 3 as 30: mismatch at position 2
      t([1, 2, 30, 4, 5], [6], [-0.6]),
    ];
    const { output, diagnostics } = new TripletsToTrajectories().adaptWithDiagnostics(triplets);
    expect(
      output.map((r) => [r.prompt_token_ids, r.response_token_ids, r.response_mask, r.triplet_indices]),
    ).toEqual([
      [[1, 2], [3, 4], [1, 1], [0]],
      [[1, 2, 30, 4, 5], [6], [1], [1]],
    ]);
    expect(diagnostics.diagnostics).toHaveLength(1);
    expect(diagnostics.diagnostics[0]).toMatchObject({
      code: "prefix_mismatch",
      details: { tripletIndex: 1, position: 2, expected: 3, actual: 30 },
    });
  });

  it("reports a prompt shorter than the context as a mismatch at its end", () => {
    const { diagnostics } = new TripletsToTrajectories().adaptWithDiagnostics([
      t([1, 2], [3], null),
      t([1, 2], [4], null),
    ]);
    expect(diagnostics.diagnostics.find((d) => d.code === "prefix_mismatch")!.details).toMatchObject({
      position: 2,
    });
  });

  it("nulls the row's logprobs when any merged turn lacks them or has the wrong length", () => {
    const output = new TripletsToTrajectories().adapt([
      t([1], [2, 3], [-0.1, -0.2]),
      t([1, 2, 3, 4], [5, 6], [-0.5]),
    ]);
    expect(output).toHaveLength(1);
    expect(output[0]!.response_mask).toEqual([1, 1, 0, 1, 1]);
    expect(output[0]!.response_logprobs).toBeNull();
  });

  it("transition mode makes one row per call", () => {
    const output = new TripletsToTrajectories({ mode: "transition" }).adapt([
      t([1], [2], [-0.1]),
      t([1, 2, 3], [4], [-0.2], 2),
    ]);
    expect(output.map((r) => [r.prompt_token_ids, r.response_token_ids, r.reward])).toEqual([
      [[1], [2], null],
      [[1, 2, 3], [4], 2],
    ]);
  });

  it("skips triplets without token ids, with a diagnostic", () => {
    const { output, diagnostics } = new TripletsToTrajectories().adaptWithDiagnostics([
      t([], [], null),
      t([1], [2], [-1]),
    ]);
    expect(output).toHaveLength(1);
    expect(diagnostics.counts.missing_token_ids).toBe(1);
  });
});
