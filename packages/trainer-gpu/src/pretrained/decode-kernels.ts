import * as tf from "@tensorflow/tfjs";
import { DECODE_KERNELS_WASM } from "./decode-kernels-wasm.js";
import { applyRotary, rmsNorm } from "./layers.js";
import {
  ensureWasmKernel,
  heapModule,
  heapOffset,
  type KernelArgs,
  type WasmBackend,
  wasmBackend,
} from "./wasm-heap.js";

/**
 * Per-row elementwise work of a generation step as one kernel each on the wasm backend, over the
 * backend's own heap: RMSNorm (6 ops as tfjs ops) and rotary embeddings (a permutation product and 3
 * elementwise ops per tensor) as WebAssembly SIMD loops (decode-kernels.wat), and the KV-cache append (a
 * concat tfjs-wasm runs in JavaScript with a typed-array view per row and head) as one `copyWithin` per
 * row and head. As ops, each costs launches and intermediate tensors, and tfjs-wasm's reductions and
 * broadcasts run scalar loops that grow with the rows. No gradients: generation only (`decoderBlocks`
 * with `inference`); elsewhere, on another backend or for shapes the SIMD loops do not take (RMSNorm
 * width not a multiple of 4, rotary width not a multiple of 8), the same math runs as the ops in layers.ts.
 */

export const RMS_NORM_KERNEL = "AglRmsNorm";
export const ROTARY_KERNEL = "AglRotary";
export const APPEND_COLUMN_KERNEL = "AglAppendColumn";

type RmsNormFn = (x: number, w: number, out: number, rows: number, d: number, eps: number) => void;
type RotaryFn = (x: number, cos: number, sin: number, out: number, ...dims: number[]) => void;
const moduleOn = heapModule(DECODE_KERNELS_WASM);

/** The SIMD kernels on the active backend's heap, or null where they cannot run. */
function simd(): { rmsnorm: RmsNormFn; rotary: RotaryFn } | null {
  const be = wasmBackend();
  const exports = be && moduleOn(be.wasm.asm.memory);
  return exports && { rmsnorm: exports.rmsnorm as RmsNormFn, rotary: exports.rotary as RotaryFn };
}

function rmsNormKernel(args: KernelArgs): tf.TensorInfo {
  const { x, weight } = args.inputs as Record<"x" | "weight", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const d = weight.shape[0] as number;
  const out = be.makeOutput(x.shape, "float32");
  const at = (t: tf.TensorInfo) => heapOffset(be, t);
  const rows = tf.util.sizeFromShape(x.shape) / d;
  simd()?.rmsnorm(at(x), at(weight), at(out), rows, d, args.attrs?.eps as number);
  return out;
}

function rotaryKernel(args: KernelArgs): tf.TensorInfo {
  const { x, cos, sin } = args.inputs as Record<"x" | "cos" | "sin", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const [B, H, T, dh] = x.shape as [number, number, number, number];
  const rot = cos.shape[3] as number;
  const out = be.makeOutput(x.shape, "float32");
  const at = (t: tf.TensorInfo) => heapOffset(be, t);
  const tableStride = cos.shape[0] === 1 ? 0 : T * rot;
  simd()?.rotary(at(x), at(cos), at(sin), at(out), B, H, T, dh, rot, tableStride);
  return out;
}

function appendColumnKernel(args: KernelArgs): tf.TensorInfo {
  const { cache, column } = args.inputs as Record<"cache" | "column", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const [B, H, L, dh] = cache.shape as [number, number, number, number];
  const out = be.makeOutput([B, H, L + 1, dh], "float32");
  const heap = be.wasm.HEAPU8;
  const [c, col, o] = [heapOffset(be, cache), heapOffset(be, column), heapOffset(be, out)];
  const block = L * dh * 4;
  const row = dh * 4;
  for (let bh = 0; bh < B * H; bh++) {
    heap.copyWithin(o + bh * (block + row), c + bh * block, c + (bh + 1) * block);
    heap.copyWithin(o + bh * (block + row) + block, col + bh * row, col + (bh + 1) * row);
  }
  return out;
}

/** The kernels run here only on the wasm backend, with float32 tensors. */
function onWasm(...ts: tf.Tensor[]): boolean {
  return wasmBackend() !== null && ts.every((t) => t.dtype === "float32");
}

/** RMSNorm over the last axis of `x` (see layers.ts `rmsNorm`). */
export function rmsNormFused(x: tf.Tensor, weight: tf.Tensor, eps: number): tf.Tensor {
  const d = x.shape[x.rank - 1] as number;
  if (!onWasm(x, weight) || weight.rank !== 1 || weight.size !== d || d % 4 !== 0 || !simd())
    return tf.tidy(() => rmsNorm(x, weight, eps));
  ensureWasmKernel(RMS_NORM_KERNEL, rmsNormKernel);
  return tf.engine().runKernel(RMS_NORM_KERNEL, { x, weight }, { eps }) as tf.Tensor;
}

/** Rotary embeddings of `x [B,H,T,dh]` with the tables of `RotaryCache.tables` (see layers.ts `applyRotary`). */
export function rotaryFused(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  const rot = cos.shape[cos.rank - 1] as number;
  const fits = cos.rank === 4 && rot % 8 === 0 && rot > 0 && x.shape[3] % 4 === 0;
  if (!onWasm(x, cos, sin) || !fits || !simd()) return tf.tidy(() => applyRotary(x, cos, sin));
  ensureWasmKernel(ROTARY_KERNEL, rotaryKernel);
  return tf.engine().runKernel(ROTARY_KERNEL, { x, cos, sin }) as tf.Tensor4D;
}

/** `cache [B,H,L,dh]` with `column [B,H,1,dh]` appended along the time axis (a `concat` on axis 2). */
export function appendColumnFused(cache: tf.Tensor4D, column: tf.Tensor4D): tf.Tensor4D {
  if (!onWasm(cache, column) || column.shape[2] !== 1) return tf.concat([cache, column], 2);
  ensureWasmKernel(APPEND_COLUMN_KERNEL, appendColumnKernel);
  return tf.engine().runKernel(APPEND_COLUMN_KERNEL, { cache, column }) as tf.Tensor4D;
}
