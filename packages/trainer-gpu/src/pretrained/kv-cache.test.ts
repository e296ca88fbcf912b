import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { BatchCache } from "../generate/batch-cache.js";
import { type LoadedPretrained, loadPretrained } from "./load.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

let root: string;
let qwen3: LoadedPretrained;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-kv-"));
  // qwen3: grouped KV heads, q/k norms and head_dim != hidden/heads all take part in the cache path.
  await writeRandomCheckpoint(join(root, "q3"), { family: "qwen3", seed: 2, initStd: 0.15 });
  qwen3 = await loadPretrained(join(root, "q3"));
});
afterAll(async () => {
  qwen3.model.dispose();
  await rm(root, { recursive: true, force: true });
});

const close = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)));
  return m;
};

describe("KV-cache decoding", () => {
  it("prefill + decode steps give the full forward's logits at every position", () => {
    const model = qwen3.model;
    const seq = [1, 40, 7, 90, 200, 11, 3, 150, 60];
    const full = tf.tidy(() => (model.logits([seq]).arraySync() as number[][][])[0] as number[][]);
    const P = 4;
    let { logits, cache } = model.prefill(seq.slice(0, P));
    expect(close(logits, full[P - 1] as number[])).toBeLessThan(1e-5);
    for (let t = P; t < seq.length; t++) {
      const bias = tf.zeros([1, 1, 1, t + 1]) as tf.Tensor4D;
      const next = model.decodeStep([seq[t] as number], [t], cache, bias);
      bias.dispose();
      for (const c of cache) tf.dispose([c.k, c.v]);
      ({ logits, cache } = next);
      expect(close(logits, full[t] as number[])).toBeLessThan(1e-5);
    }
    expect(cache[0]?.k.shape).toEqual([1, 2, seq.length, 16]);
    for (const c of cache) tf.dispose([c.k, c.v]);
  });

  it("rows of different lengths share a left-padded cache (the generator's layout) and match alone", () => {
    const model = qwen3.model;
    const a = [1, 5, 9, 13, 17, 21];
    const b = [1, 8, 30];
    const cache = new BatchCache();
    const pa = model.prefill(a);
    cache.addRows(pa.cache, a.length);
    const pb = model.prefill(b);
    cache.addRows(pb.cache, b.length);
    const bias = cache.stepBias();
    const step = model.decodeStep([70, 80], [a.length, b.length], cache.current, bias);
    bias.dispose();
    cache.advance(step.cache);
    const V = model.config.vocabSize;
    const alone = (ids: number[]) =>
      tf.tidy(() => {
        const l = model.logits([ids]).arraySync() as number[][][];
        return l[0]?.[ids.length - 1] as number[];
      });
    expect(close(step.logits.subarray(0, V), alone([...a, 70]))).toBeLessThan(1e-5);
    expect(close(step.logits.subarray(V, 2 * V), alone([...b, 80]))).toBeLessThan(1e-5);
    cache.reset();
  });

  it("a left-padded batch with an attention mask gives each row's logits alone", () => {
    const model = qwen3.model;
    const rows = [
      [0, 0, 1, 4, 9],
      [1, 7, 3, 2, 8],
    ];
    const mask = [
      [0, 0, 1, 1, 1],
      [1, 1, 1, 1, 1],
    ];
    const batch = tf.tidy(() => model.logits(rows, mask).arraySync() as number[][][]);
    const alone = tf.tidy(() => model.logits([[1, 4, 9]]).arraySync() as number[][][]);
    expect(
      close((batch[0] as number[][])[4] as number[], (alone[0] as number[][])[2] as number[]),
    ).toBeLessThan(1e-5);
  });
});
