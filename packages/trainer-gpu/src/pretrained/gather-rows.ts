import * as tf from "@tensorflow/tfjs";
import { ensureWasmKernel, heapOffset, type KernelArgs, type WasmBackend, wasmBackend } from "./wasm-heap.js";

/**
 * Rows of a tensor along its first axis, as whole-row copies. tfjs-backend-wasm's GatherV2 moves one
 * element at a time (~70 ns each here): embedding 16 tokens cost ~0.3 ms of a decode step, and copying a
 * prefilled prompt's KV cache to the 16 rows of its group ~2 ms per layer. On wasm this kernel copies
 * each row with one `copyWithin` on the backend's heap. No gradient: generation only (embedding for
 * training keeps `embedRows`).
 */

export const GATHER_ROWS_KERNEL = "AglGatherRows";

function wasmKernel(args: KernelArgs): tf.TensorInfo {
  const { x } = args.inputs as { x: tf.TensorInfo };
  const rows = args.attrs?.rows as number[];
  const be = args.backend as WasmBackend;
  const rowBytes = (tf.util.sizeFromShape(x.shape) / (x.shape[0] as number)) * 4;
  const out = be.makeOutput([rows.length, ...x.shape.slice(1)], x.dtype);
  if (rows.length === 0 || rowBytes === 0) return out;
  const heap = be.wasm.HEAPU8;
  const src = heapOffset(be, x);
  const dst = heapOffset(be, out);
  rows.forEach((r, i) => {
    heap.copyWithin(dst + i * rowBytes, src + r * rowBytes, src + (r + 1) * rowBytes);
  });
  return out;
}

/** `x[rows[i]]` for each `i` (`[rows.length, ...x.shape[1:]]`); float32 or int32. */
export function gatherRows<T extends tf.Tensor>(x: T, rows: ArrayLike<number>): T {
  const n = x.shape[0] as number;
  const list = Array.from(rows);
  for (const r of list)
    if (!Number.isInteger(r) || r < 0 || r >= n)
      throw new RangeError(`gatherRows: row ${r} is not in [0, ${n})`);
  if (wasmBackend() && (x.dtype === "float32" || x.dtype === "int32")) {
    ensureWasmKernel(GATHER_ROWS_KERNEL, wasmKernel);
    return tf.engine().runKernel(GATHER_ROWS_KERNEL, { x }, { rows: list }) as T;
  }
  return tf.tidy(() => tf.gather(x, tf.tensor1d(list, "int32"), 0)) as T;
}
