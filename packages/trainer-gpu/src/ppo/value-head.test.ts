import type * as tfc from "@tensorflow/tfjs-core";
import { beforeAll, describe, expect, it } from "vitest";
import { useCpuBackend } from "./test-support/tf-cpu.js";
import type { TrainRow } from "./triplet-rows.js";
import { type HiddenStates, ValueHead } from "./value-head.js";

let tf: typeof tfc;
beforeAll(async () => {
  tf = await useCpuBackend();
});

const row = (prompt: number[], response: number[]): TrainRow => ({
  rolloutId: prompt.join(),
  uid: "u",
  score: 0,
  promptIds: prompt,
  responseIds: response,
  responseMask: response.map(() => 1),
  rolloutLogprobs: null,
  isDrop: false,
  responseTruncated: false,
});

describe("GAE value head", () => {
  it("regresses toward the returns with the clipped value loss", () => {
    const features: HiddenStates = {
      hidden: (ids) => tf.tidy(() => tf.cast(tf.oneHot(tf.cast(ids, "int32"), 8), "float32") as tfc.Tensor3D),
    };
    const head = new ValueHead(8, 16, 1);
    const rows = [row([1], [2, 3]), row([4], [5, 6])];
    const returns = [
      [1, 1],
      [-1, -1],
    ];
    const err = () => {
      const v = head.values(features, rows, 2, 0);
      return v.flat().reduce((a, x, i) => a + (x - returns.flat()[i]!) ** 2, 0);
    };
    const before = err();
    for (let i = 0; i < 60; i++) {
      const old = head.values(features, rows, 2, 0);
      head.update(features, rows, old, returns, {
        miniBatchRows: 2,
        padId: 0,
        lr: 0.05,
        clip: 0.5,
        gradClip: 1,
      });
    }
    expect(err()).toBeLessThan(before * 0.1);
    const v = head.values(features, rows, 2, 0);
    expect(v[0]![0]).toBeGreaterThan(0.5);
    expect(v[1]![1]).toBeLessThan(-0.5);
  });
});
