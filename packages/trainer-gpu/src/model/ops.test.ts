import * as tf from "@tensorflow/tfjs";
import { beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { addBias, layerNorm, mm } from "./ops.js";

/** The hand-written gradients (chosen for WASM speed) must equal tfjs's stock ones. */

const maxAbsDiff = (a: tf.Tensor, b: tf.Tensor) =>
  tf.tidy(() => tf.max(tf.abs(tf.sub(a, b))).dataSync()[0] as number);

function gradsOf(f: (...xs: tf.Tensor[]) => tf.Tensor, xs: tf.Tensor[], dy: tf.Tensor): tf.Tensor[] {
  return tf.grads((...args: tf.Tensor[]) => tf.sum(tf.mul(f(...args), dy)))(xs);
}

function expectSameGrads(
  ours: (...xs: tf.Tensor[]) => tf.Tensor,
  stock: (...xs: tf.Tensor[]) => tf.Tensor,
  xs: tf.Tensor[],
): void {
  tf.tidy(() => {
    const out = stock(...xs);
    const dy = tf.randomNormal(out.shape, 0, 1, "float32", 7);
    expect(maxAbsDiff(ours(...xs), out)).toBeLessThan(1e-5);
    const a = gradsOf(ours, xs, dy);
    const b = gradsOf(stock, xs, dy);
    a.forEach((g, i) => {
      expect(g.shape).toEqual(xs[i]?.shape);
      // Relative to the gradient's scale (sums over 2048 rows reach tens).
      const scale = Math.max(1, tf.max(tf.abs(b[i] as tf.Tensor)).dataSync()[0] as number);
      expect(maxAbsDiff(g, b[i] as tf.Tensor) / scale).toBeLessThan(1e-5);
    });
  });
}

const rnd = (shape: number[], seed: number) => tf.randomNormal(shape, 0, 1, "float32", seed);

describe("ops gradients", () => {
  beforeAll(async () => {
    await selectBackend({ log: () => {} });
  });

  it("mm matches matMul for a wide left operand (transposed-product path) and a narrow one", () => {
    const stock = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a as tf.Tensor2D, b as tf.Tensor2D);
    expectSameGrads(mm, stock, [rnd([300, 96], 1), rnd([96, 16], 2)]); // a wider than dy: (dy^T a)^T
    expectSameGrads(mm, stock, [rnd([300, 16], 3), rnd([16, 96], 4)]); // a^T dy
    const batched = (a: tf.Tensor, b: tf.Tensor) => tf.matMul(a as tf.Tensor3D, b as tf.Tensor3D);
    expectSameGrads(mm, batched, [rnd([2, 3, 24, 24], 5).reshape([6, 24, 24]), rnd([6, 24, 8], 6)]);
  });

  it("addBias and layerNorm match their stock-gradient forms", () => {
    expectSameGrads(addBias, (x, b) => tf.add(x, b as tf.Tensor), [rnd([2048, 64], 8), rnd([64], 9)]);
    const stockLn = (x: tf.Tensor, g: tf.Tensor, b: tf.Tensor) => {
      const mean = tf.mean(x, -1, true);
      const c = tf.sub(x, mean);
      return tf.add(tf.mul(tf.mul(c, tf.rsqrt(tf.add(tf.mean(tf.square(c), -1, true), 1e-5))), g), b);
    };
    expectSameGrads((x, g, b) => layerNorm(x, g as tf.Tensor, b as tf.Tensor), stockLn, [
      rnd([512, 32], 10),
      rnd([32], 11),
      rnd([32], 12),
    ]);
    expectSameGrads((x, g, b) => layerNorm(x, g as tf.Tensor, b as tf.Tensor), stockLn, [
      rnd([4, 16, 32], 13),
      rnd([32], 14),
      rnd([32], 15),
    ]);
  });
});
