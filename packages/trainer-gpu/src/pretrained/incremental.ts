import * as tf from "@tensorflow/tfjs";
import { checkLength } from "../model/batch-inputs.js";
import type { LayerKV } from "../model/causal-lm.js";
import type { PretrainedModel } from "./pretrained-model.js";

/**
 * Incremental decoding of `PretrainedModel` for the generator: prefill prompts into a KV cache, then
 * decode one token per row against it. Only the next-token logits `[rows, V]` are read back.
 */

/** Prefill equal-length prompts: next-token logits of each (row-major `[n, V]`) and the KV cache. */
export function prefillRows(
  model: PretrainedModel,
  prompts: ReadonlyArray<readonly number[]>,
  adapters: boolean,
): { logits: Float32Array; cache: LayerKV[] } {
  const n = prompts.length;
  const T = prompts[0]?.length ?? 0;
  if (n === 0 || T === 0) throw new Error("prefill needs at least one non-empty prompt");
  if (prompts.some((p) => p.length !== T)) throw new Error("prefillMany needs prompts of equal length");
  checkLength(T, model.config.contextLength);
  const flat = new Int32Array(n * T);
  const positions = new Int32Array(n * T);
  prompts.forEach((p, i) => {
    flat.set(p, i * T);
    for (let t = 0; t < T; t++) positions[i * T + t] = t;
  });
  const d = model.config.dModel;
  const result = tf.tidy(() => {
    const { h, kv } = model.blocks(model.embed(flat), n, T, positions, model.causalMask(T), adapters);
    const last = tf.reshape(tf.slice(tf.reshape(h, [n, T, d]), [0, T - 1, 0], [n, 1, d]), [n, d]);
    return { logits: model.head(last), kv: kv.map((e) => ({ k: e.k, v: e.v })) };
  });
  const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
  result.logits.dispose();
  return { logits, cache: result.kv };
}

/** One decode step: `tokens[i]` at `positions[i]` against `cache` (masked by `keyBias`). */
export function decodeRows(
  model: PretrainedModel,
  tokens: readonly number[],
  positions: readonly number[],
  cache: LayerKV[],
  keyBias: tf.Tensor4D,
  adapters: boolean,
): { logits: Float32Array; cache: LayerKV[] } {
  const S = tokens.length;
  for (const p of positions) checkLength(p + 1, model.config.contextLength);
  const result = tf.tidy(() => {
    const pos = Int32Array.from(positions);
    const { h, kv } = model.blocks(model.embed(Int32Array.from(tokens)), S, 1, pos, keyBias, adapters, cache);
    return { logits: model.head(h), kv: kv.map((e) => ({ k: e.k, v: e.v })) };
  });
  const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
  result.logits.dispose();
  return { logits, cache: result.kv };
}
