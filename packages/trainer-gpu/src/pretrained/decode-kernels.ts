import * as tf from "@tensorflow/tfjs";
import { applyRotary, rmsNorm, siluGate } from "./layers.js";
import {
  ensureWasmKernel,
  heapF32,
  heapOffset,
  type KernelArgs,
  type WasmBackend,
  wasmBackend,
} from "./wasm-heap.js";

/**
 * The per-row elementwise work of a generation step as one kernel each on the wasm backend, run in
 * JavaScript over the backend's heap: RMSNorm (6 ops), rotary embeddings (a permutation product and 3
 * elementwise ops per tensor), the SiLU gate (3 ops) and the KV-cache append (a generic concat). Each is
 * a few thousand multiply-adds at 16 rows; as tfjs ops they cost a launch and an intermediate tensor each,
 * and tfjs-wasm's reductions and broadcasts run scalar loops that grow with the rows. No gradients:
 * generation only (`decoderBlocks` with `inference`); elsewhere, or on another backend, the same math
 * runs as the ops in layers.ts.
 */

export const RMS_NORM_KERNEL = "AglRmsNorm";
export const ROTARY_KERNEL = "AglRotary";
export const SILU_GATE_KERNEL = "AglSiluGate";
export const APPEND_COLUMN_KERNEL = "AglAppendColumn";

function rmsNormKernel(args: KernelArgs): tf.TensorInfo {
  const { x, weight } = args.inputs as Record<"x" | "weight", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const eps = args.attrs?.eps as number;
  const out = be.makeOutput(x.shape, "float32");
  const [xs, w, o] = [heapF32(be, x), heapF32(be, weight), heapF32(be, out)];
  const d = w.length;
  for (let r = 0; r < xs.length; r += d) {
    let ss = 0;
    for (let i = r; i < r + d; i++) ss += (xs[i] as number) * (xs[i] as number);
    const inv = 1 / Math.sqrt(ss / d + eps);
    for (let i = 0; i < d; i++) o[r + i] = (xs[r + i] as number) * inv * (w[i] as number);
  }
  return out;
}

function rotaryKernel(args: KernelArgs): tf.TensorInfo {
  const { x, cos, sin } = args.inputs as Record<"x" | "cos" | "sin", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const [B, H, T, dh] = x.shape as [number, number, number, number];
  const rot = cos.shape[3] as number;
  const tableRows = cos.shape[0] as number;
  const out = be.makeOutput(x.shape, "float32");
  const [xs, c, s, o] = [heapF32(be, x), heapF32(be, cos), heapF32(be, sin), heapF32(be, out)];
  const half = rot / 2;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0; t < T; t++) {
        const at = ((b * H + h) * T + t) * dh;
        const tab = ((tableRows === 1 ? 0 : b) * T + t) * rot;
        for (let j = 0; j < rot; j++) {
          // rotate_half pairs dimension j with j +- rot/2; `sin` carries the sign (see applyRotary).
          const other = xs[at + (j < half ? j + half : j - half)] as number;
          o[at + j] = (xs[at + j] as number) * (c[tab + j] as number) + other * (s[tab + j] as number);
        }
        for (let j = rot; j < dh; j++) o[at + j] = xs[at + j] as number;
      }
  return out;
}

function siluGateKernel(args: KernelArgs): tf.TensorInfo {
  const { gate, up } = args.inputs as Record<"gate" | "up", tf.TensorInfo>;
  const be = args.backend as WasmBackend;
  const out = be.makeOutput(gate.shape, "float32");
  const [g, u, o] = [heapF32(be, gate), heapF32(be, up), heapF32(be, out)];
  for (let i = 0; i < g.length; i++) {
    const v = g[i] as number;
    o[i] = (v / (1 + Math.exp(-v))) * (u[i] as number);
  }
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

/** RMSNorm over the last axis of `x` (see layers.ts `rmsNorm`); sums of squares in float64. */
export function rmsNormFused(x: tf.Tensor, weight: tf.Tensor, eps: number): tf.Tensor {
  if (!onWasm(x, weight) || weight.size !== x.shape[x.rank - 1]) return rmsNorm(x, weight, eps);
  ensureWasmKernel(RMS_NORM_KERNEL, rmsNormKernel);
  return tf.engine().runKernel(RMS_NORM_KERNEL, { x, weight }, { eps }) as tf.Tensor;
}

/** Rotary embeddings of `x [B,H,T,dh]` with the tables of `RotaryCache.tables` (see layers.ts `applyRotary`). */
export function rotaryFused(x: tf.Tensor4D, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor4D {
  if (!onWasm(x, cos, sin) || cos.rank !== 4) return applyRotary(x, cos, sin);
  ensureWasmKernel(ROTARY_KERNEL, rotaryKernel);
  return tf.engine().runKernel(ROTARY_KERNEL, { x, cos, sin }) as tf.Tensor4D;
}

/** `silu(gate) * up` (see layers.ts `siluGate`). */
export function siluGateFused(gate: tf.Tensor, up: tf.Tensor): tf.Tensor {
  if (!onWasm(gate, up) || !tf.util.arraysEqual(gate.shape, up.shape)) return siluGate(gate, up);
  ensureWasmKernel(SILU_GATE_KERNEL, siluGateKernel);
  return tf.engine().runKernel(SILU_GATE_KERNEL, { gate, up }) as tf.Tensor;
}

/** `cache [B,H,L,dh]` with `column [B,H,1,dh]` appended along the time axis (a `concat` on axis 2). */
export function appendColumnFused(cache: tf.Tensor4D, column: tf.Tensor4D): tf.Tensor4D {
  if (!onWasm(cache, column) || column.shape[2] !== 1) return tf.concat([cache, column], 2);
  ensureWasmKernel(APPEND_COLUMN_KERNEL, appendColumnKernel);
  return tf.engine().runKernel(APPEND_COLUMN_KERNEL, { cache, column }) as tf.Tensor4D;
}
