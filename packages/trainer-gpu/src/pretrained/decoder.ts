import * as tf from "@tensorflow/tfjs";
import type { LayerKV } from "../model/causal-lm.js";
import { addBias, mm } from "../model/ops.js";
import {
  type AdapterChoice,
  type AdapterPlan,
  adapterDelta,
  type LoraState,
  planAdapters,
} from "./adapter-rows.js";
import { decodeAttention, hasDecodeAttention } from "./decode-attention.js";
import { appendColumnFused, rmsNormFused, rotaryFused } from "./decode-kernels.js";
import type { ArchConfig } from "./hf-config.js";
import { applyRotary, groupBias, groupedAttention, rmsNorm, siluGate } from "./layers.js";
import type { RotaryCache } from "./rope.js";

/**
 * The decoder stack of `PretrainedModel`: per layer RMSNorm, rotary grouped-query attention and the
 * SiLU-gated MLP (each linear with its LoRA adapter), then the final norm. Kept apart from the model
 * class, which owns the weights and the CausalLM surface, so this file is only the forward math.
 */

/** What the decoder reads from the model: its architecture, weights and LoRA adapters (by name). */
export interface DecoderWeights {
  readonly arch: ArchConfig;
  readonly adapters: ReadonlyMap<string, LoraState>;
  /** The named weight, or undefined when this architecture has none (e.g. a bias). */
  weight(name: string): tf.Variable | undefined;
}

/**
 * Switch for the generation kernels (decode-attention.ts, decode-kernels.ts, gather-rows.ts); tests and
 * benchmarks compare them with the op-by-op path.
 */
export const generationKernels = { enabled: true };

/** Most attention scores (`B*H*T*L`, float32) the fused attention allocates at once: 64 MiB. */
const FUSED_ATTENTION_MAX_SCORES = 16 * 2 ** 20;

function need(m: DecoderWeights, name: string): tf.Variable {
  const v = m.weight(name);
  if (!v) throw new Error(`No weight "${name}"`);
  return v;
}

function linear(m: DecoderWeights, x: tf.Tensor, path: string, adapters: AdapterPlan): tf.Tensor {
  let y = mm(x, need(m, `${path}.weight`));
  const bias = m.weight(`${path}.bias`);
  if (bias) y = addBias(y, bias);
  const delta = adapterDelta(adapters, x, path, mm);
  return delta ? tf.add(y, delta) : y;
}

/**
 * Run the decoder layers on embedded tokens `x [B*T,d]` at `positions`; `bias` masks attention scores;
 * `adapters` selects the LoRA adapters, for the whole batch or per row (see adapter-rows.ts). `inference`:
 * no gradient will be taken (generation), which allows kernels without one.
 */
export function decoderBlocks(
  m: DecoderWeights,
  rotary: RotaryCache,
  x: tf.Tensor2D,
  B: number,
  T: number,
  positions: Int32Array,
  bias: tf.Tensor,
  choice: AdapterChoice,
  past?: LayerKV[],
  inference = false,
): { h: tf.Tensor2D; kv: LayerKV[] } {
  const a = m.arch;
  const adapters = planAdapters(m.adapters, choice, B, T);
  const { numHeads: H, numKvHeads: Hkv, headDim: dh, rmsNormEps: eps } = a;
  const { cos, sin } = rotary.tables(positions, B, T);
  const heads = (t: tf.Tensor, n: number) => tf.reshape(t, [B, T, n, dh]);
  // With one position per row, [B,1,n,dh] and [B,n,1,dh] hold the same order: a reshape, not a copy.
  const toBHTD = (t: tf.Tensor) =>
    (T === 1
      ? tf.reshape(t, [B, t.shape[2] as number, 1, dh])
      : tf.transpose(t, [0, 2, 1, 3])) as tf.Tensor4D;
  const kv: LayerKV[] = [];
  // Kernels without gradients, so only for callers that never differentiate (`inference`: generation).
  const kernels = inference && generationKernels.enabled;
  const norm = kernels ? rmsNormFused : rmsNorm;
  const rotate = kernels ? rotaryFused : applyRotary;
  // A decode step: one new token per row against a cache.
  const step = T === 1 && past !== undefined;
  // The fused attention (decode steps and prefills) where the backend has it, while its scores buffer
  // `[B,H,T,L]` stays moderate (the op path materialises the same scores).
  const L = T + (past?.[0]?.k.shape[2] ?? 0);
  const fused = kernels && B * H * T * L <= FUSED_ATTENTION_MAX_SCORES && hasDecodeAttention(dh);
  const attnBias = fused ? bias : groupBias(bias, H / Hkv);
  const append = (prev: tf.Tensor4D, col: tf.Tensor4D) =>
    kernels && step ? appendColumnFused(prev, col) : (tf.concat([prev, col], 2) as tf.Tensor4D);
  let h: tf.Tensor = x;
  for (let l = 0; l < a.numLayers; l++) {
    const p = `model.layers.${l}`;
    const xn = norm(h, need(m, `${p}.input_layernorm.weight`), eps);
    let q = heads(linear(m, xn, `${p}.self_attn.q_proj`, adapters), H);
    let k = heads(linear(m, xn, `${p}.self_attn.k_proj`, adapters), Hkv);
    const v = toBHTD(heads(linear(m, xn, `${p}.self_attn.v_proj`, adapters), Hkv));
    if (a.qkNorm) {
      q = norm(q, need(m, `${p}.self_attn.q_norm.weight`), eps);
      k = norm(k, need(m, `${p}.self_attn.k_norm.weight`), eps);
    }
    const qr = rotate(toBHTD(q), cos, sin);
    let kr = rotate(toBHTD(k), cos, sin);
    let vr = v;
    if (past) {
      const prev = past[l] as LayerKV;
      kr = append(prev.k, kr);
      vr = append(prev.v, vr);
    }
    kv.push({ k: kr, v: vr });
    const attn = fused
      ? decodeAttention(qr, kr, vr, attnBias, 1 / Math.sqrt(dh))
      : groupedAttention(qr, kr, vr, attnBias, 1 / Math.sqrt(dh));
    const merged = tf.reshape(T === 1 ? attn : tf.transpose(attn, [0, 2, 1, 3]), [B * T, H * dh]);
    h = tf.add(h, linear(m, merged, `${p}.self_attn.o_proj`, adapters));
    const xn2 = norm(h, need(m, `${p}.post_attention_layernorm.weight`), eps);
    const act = siluGate(
      linear(m, xn2, `${p}.mlp.gate_proj`, adapters),
      linear(m, xn2, `${p}.mlp.up_proj`, adapters),
    );
    h = tf.add(h, linear(m, act, `${p}.mlp.down_proj`, adapters));
  }
  return { h: norm(h, need(m, "model.norm.weight"), eps) as tf.Tensor2D, kv };
}
