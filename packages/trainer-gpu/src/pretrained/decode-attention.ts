import * as tf from "@tensorflow/tfjs";
import { DECODE_ATTENTION_WASM } from "./decode-attention-wasm.js";
import {
  ensureWasmKernel,
  heapModule,
  heapOffset,
  type KernelArgs,
  type WasmBackend,
  wasmBackend,
} from "./wasm-heap.js";

/**
 * Attention of one new token per row against its KV cache as one kernel on the wasm backend: `q.K^T`
 * with the scale and the bias, the softmax and `p.V` for every query head, reading grouped key/value
 * heads in place (no repeat, no transpose, no intermediate tensors). tfjs-wasm runs the op-by-op path's
 * two batched products (`[g, dh] x [dh, L]` per row and key head) in its scalar per-batch loop, about as
 * slow as plain JavaScript; here the products are WebAssembly SIMD loops (decode-attention.wat, run on the
 * backend's own memory) and the softmax runs in JavaScript over the scores in place. Inference only (no
 * gradient): `decoderBlocks` takes it for generation, a decode step's one token per row against its cache
 * and a prefill's T tokens per row (each with its own causal bias row).
 */

export const DECODE_ATTENTION_KERNEL = "AglDecodeAttention";

/** Rows, query heads, key/value heads, cached positions, head size. */
type Dims = [B: number, H: number, Hkv: number, L: number, dh: number];
type ScoresFn = (
  q: number,
  k: number,
  bias: number,
  out: number,
  ...rest: [...Dims, biasStride: number, Q: number, biasQStride: number, scale: number]
) => void;
type WeightedFn = (p: number, v: number, out: number, ...dims: Dims) => void;

type Kernels = { scores: ScoresFn; weighted: WeightedFn };
const moduleOn = heapModule(DECODE_ATTENTION_WASM);

/** The kernels on `memory`, or null where they cannot run on it. */
function kernelsOn(memory: WebAssembly.Memory): Kernels | null {
  const exports = moduleOn(memory);
  return exports && { scores: exports.scores as ScoresFn, weighted: exports.weighted as WeightedFn };
}

/** Softmax in place over each run of `L` values of `p` (float64 sums). */
function softmaxRows(p: Float32Array, L: number): void {
  for (let o = 0; o < p.length; o += L) {
    let max = Number.NEGATIVE_INFINITY;
    for (let t = o; t < o + L; t++) if ((p[t] as number) > max) max = p[t] as number;
    let sum = 0;
    for (let t = o; t < o + L; t++) {
      const e = Math.exp((p[t] as number) - max);
      p[t] = e;
      sum += e;
    }
    for (let t = o; t < o + L; t++) p[t] = (p[t] as number) / sum;
  }
}

function wasmKernel(args: KernelArgs) {
  const { q, k, v, bias } = args.inputs as Record<"q" | "k" | "v" | "bias", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const [B, H, T, dh] = q.shape as [number, number, number, number];
  const [, Hkv, L] = k.shape as [number, number, number];
  const [biasRows, , biasQ] = bias.shape as [number, number, number];
  if (bias.shape[3] !== L || (biasRows !== 1 && biasRows !== B) || (biasQ !== 1 && biasQ !== T))
    throw new Error(`${DECODE_ATTENTION_KERNEL}: a bias [B|1,1,T|1,${L}]`);
  const kernels = kernelsOn(be.wasm.asm.memory) as Kernels;
  const out = be.makeOutput(q.shape, "float32");
  const at = (t: tf.TensorInfo) => heapOffset(be, t);
  // The T queries of a head are T consecutive "heads" of one query each: [B,H,T,dh] is [B,H*T,1,dh],
  // and query head h*T+t still reads key head h/g (g*T of them per key head).
  const HT = H * T;
  const scores = be.wasm._malloc(B * HT * L * 4);
  try {
    kernels.scores(
      at(q),
      at(k),
      at(bias),
      scores,
      B,
      HT,
      Hkv,
      L,
      dh,
      biasRows === 1 ? 0 : biasQ * L,
      T,
      biasQ === 1 ? 0 : L,
      args.attrs?.scale as number,
    );
    // A view taken now: nothing allocates between here and its last use.
    softmaxRows(new Float32Array(be.wasm.HEAPU8.buffer, scores, B * HT * L), L);
    kernels.weighted(scores, at(v), at(out), B, HT, Hkv, L, dh);
  } finally {
    be.wasm._free(scores);
  }
  return out;
}

/** Whether the active backend runs the kernel for head size `dh` (registering it on first use). */
export function hasDecodeAttention(dh: number): boolean {
  const be = wasmBackend();
  if (!be || dh % 4 !== 0 || !kernelsOn(be.wasm.asm.memory)) return false;
  ensureWasmKernel(DECODE_ATTENTION_KERNEL, wasmKernel);
  return true;
}

/**
 * Attention `[B,H,T,dh]` of `q [B,H,T,dh]` against `k, v [B,Hkv,L,dh]` with the additive `bias
 * [B|1,1,T|1,L]` (a decode step's padding mask, or a prefill's causal rows), where `hasDecodeAttention(dh)`
 * holds; float32 inputs.
 */
export function decodeAttention(
  q: tf.Tensor4D,
  k: tf.Tensor4D,
  v: tf.Tensor4D,
  bias: tf.Tensor,
  scale: number,
): tf.Tensor4D {
  return tf.engine().runKernel(DECODE_ATTENTION_KERNEL, { q, k, v, bias }, { scale }) as tf.Tensor4D;
}
