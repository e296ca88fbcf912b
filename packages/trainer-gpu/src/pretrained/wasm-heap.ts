import * as tf from "@tensorflow/tfjs";

/**
 * Access to tfjs-backend-wasm's own heap for the generation kernels (decode-attention.ts,
 * decode-kernels.ts, gather-rows.ts): they read their inputs and write their outputs where the backend
 * keeps tensors, so a kernel costs one call instead of a chain of op launches and intermediate tensors.
 */

/** tfjs-backend-wasm's `BackendWasm`, as far as these kernels read it. */
export interface WasmBackend {
  wasm: {
    asm: { memory: WebAssembly.Memory };
    HEAPU8: Uint8Array;
    _malloc(bytes: number): number;
    _free(ptr: number): void;
  };
  dataIdMap: { get(dataId: object): { memoryOffset: number } };
  makeOutput(shape: number[], dtype: tf.DataType): tf.TensorInfo;
}

/** Arguments tfjs passes a kernel function. */
export interface KernelArgs {
  inputs: tf.NamedTensorInfoMap;
  backend: unknown;
  attrs?: tf.NamedAttrMap;
}

/** The active backend when it is tfjs-backend-wasm, else null. */
export function wasmBackend(): WasmBackend | null {
  return tf.getBackend() === "wasm" ? (tf.backend() as unknown as WasmBackend) : null;
}

/** Byte offset of a tensor's data in the wasm heap. */
export function heapOffset(be: WasmBackend, t: tf.TensorInfo): number {
  return be.dataIdMap.get(t.dataId).memoryOffset;
}

/** Register `kernelFunc` as `name` on the wasm backend (once). */
export function ensureWasmKernel(name: string, kernelFunc: (args: KernelArgs) => tf.TensorInfo): void {
  if (!tf.getKernel(name, "wasm"))
    tf.registerKernel({ kernelName: name, backendName: "wasm", kernelFunc: kernelFunc as tf.KernelFunc });
}

/**
 * A WebAssembly module (base64) that imports the backend's heap as `env.memory`, instantiated once per
 * heap (a grown heap is the same Memory). The getter returns its exports, or null where it cannot run on
 * that heap (a shared memory of a multi-threaded build, no SIMD support).
 */
export function heapModule(base64: string): (memory: WebAssembly.Memory) => WebAssembly.Exports | null {
  const instances = new WeakMap<WebAssembly.Memory, WebAssembly.Exports | null>();
  let compiled: WebAssembly.Module | undefined;
  return (memory) => {
    let exports = instances.get(memory);
    if (exports === undefined) {
      try {
        compiled ??= new WebAssembly.Module(Buffer.from(base64, "base64"));
        exports = new WebAssembly.Instance(compiled, { env: { memory } }).exports;
      } catch {
        exports = null;
      }
      instances.set(memory, exports);
    }
    return exports;
  };
}
