import * as tf from "@tensorflow/tfjs";
import { checkLength } from "../model/batch-inputs.js";
import type { LayerKV } from "../model/causal-lm.js";
import type { AdapterChoice } from "./adapter-rows.js";
import { gatherRows } from "./gather-rows.js";
import type { PretrainedModel } from "./pretrained-model.js";

/**
 * Incremental decoding of `PretrainedModel` for the generator: prefill prompts into a KV cache, then
 * decode one token per row against it. Only the next-token logits `[rows, V]` are read back.
 */

/** Prefill equal-length prompts: next-token logits of each (row-major `[n, V]`) and the KV cache. */
export function prefillRows(
  model: PretrainedModel,
  prompts: ReadonlyArray<readonly number[]>,
  adapters: AdapterChoice,
): { logits: Float32Array; cache: LayerKV[] } {
  return prefillAfterRows(model, [], prompts, adapters);
}

/** One decode step: `tokens[i]` at `positions[i]` against `cache` (masked by `keyBias`). */
export function decodeRows(
  model: PretrainedModel,
  tokens: readonly number[],
  positions: readonly number[],
  cache: LayerKV[],
  keyBias: tf.Tensor4D,
  adapters: AdapterChoice,
): { logits: Float32Array; cache: LayerKV[] } {
  const S = tokens.length;
  for (const p of positions) checkLength(p + 1, model.config.contextLength);
  const result = tf.tidy(() => {
    const pos = Int32Array.from(positions);
    const { h, kv } = model.blocks(
      model.embed(Int32Array.from(tokens), true),
      S,
      1,
      pos,
      keyBias,
      adapters,
      cache,
      true,
    );
    return { logits: model.head(h), kv: kv.map((e) => ({ k: e.k, v: e.v })) };
  });
  const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
  result.logits.dispose();
  return { logits, cache: result.kv };
}

/**
 * Prefill equal-length prompts that all start with the `L` tokens whose keys/values `prefix` holds
 * (`[1, H, L, dh]` per layer, e.g. from a prefix cache; none for a plain prefill): only positions
 * `L..T-1` run, against the prefix repeated over the rows. Same logits and cache `[n, H, T, dh]` as
 * prefilling the whole prompts.
 */
export function prefillAfterRows(
  model: PretrainedModel,
  prefix: readonly LayerKV[],
  prompts: ReadonlyArray<readonly number[]>,
  adapters: AdapterChoice,
): { logits: Float32Array; cache: LayerKV[] } {
  const n = prompts.length;
  const T = prompts[0]?.length ?? 0;
  const L = prefix[0]?.k.shape[2] ?? 0;
  const S = T - L;
  if (n === 0 || S < 1) throw new Error(`prefill needs non-empty prompts longer than the ${L}-token prefix`);
  if (prompts.some((p) => p.length !== T)) throw new Error("prefill needs prompts of equal length");
  checkLength(T, model.config.contextLength);
  const flat = new Int32Array(n * S);
  const positions = new Int32Array(n * S);
  prompts.forEach((p, i) => {
    flat.set(p.slice(L), i * S);
    for (let t = 0; t < S; t++) positions[i * S + t] = L + t;
  });
  const d = model.config.dModel;
  const repeat = new Array<number>(n).fill(0);
  const result = tf.tidy(() => {
    const past =
      L === 0
        ? undefined
        : prefix.map((e) => ({
            k: n === 1 ? e.k : gatherRows(e.k, repeat),
            v: n === 1 ? e.v : gatherRows(e.v, repeat),
          }));
    // The new positions see every prefix key and each other causally: rows L..T-1 of the causal mask.
    const mask = model.causalMask(T);
    const bias = L === 0 ? mask : tf.slice(mask, [0, 0, L, 0], [1, 1, S, T]);
    const { h, kv } = model.blocks(model.embed(flat, true), n, S, positions, bias, adapters, past, true);
    const last = tf.reshape(tf.slice(tf.reshape(h, [n, S, d]), [0, S - 1, 0], [n, 1, d]), [n, d]);
    return { logits: model.head(last), kv: kv.map((e) => ({ k: e.k, v: e.v })) };
  });
  const logits = Float32Array.from(result.logits.dataSync() as Float32Array);
  result.logits.dispose();
  return { logits, cache: result.kv };
}
