import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { type BackendSelection, type ModuleLoader, selectBackend } from "../backend/select.js";
import { loadPretrained } from "../pretrained/load.js";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";

/**
 * `pnpm gpu:check`: load the GPU backend, run a forward and backward pass of a tiny qwen2-architecture
 * checkpoint on it, run the same on WASM, and compare logits and gradients. Without a GPU backend it
 * says so and why (package not installed, native addon not built, no CUDA device) and reports
 * status "no-gpu"; the CLI exits 2 then, 1 on a numerical mismatch, 0 when the GPU agrees with WASM.
 */

export type GpuCheckStatus = "ok" | "no-gpu" | "mismatch";

export interface GpuCheckOptions {
  /** Backend under test (default "gpu" = @tensorflow/tfjs-node-gpu on CUDA). */
  target?: string;
  /** Reference backend (default "wasm"). */
  reference?: string;
  /** Largest accepted difference: max |Δlogit| and max relative gradient error (default 1e-2; GPUs may use TF32). */
  tolerance?: number;
  log?: (line: string) => void;
  /** Stand-in loader (tests). */
  importModule?: ModuleLoader;
}

export interface GpuCheckResult {
  status: GpuCheckStatus;
  message: string;
  target?: BackendSelection;
  maxLogitDiff?: number;
  /** max over weights of ‖g_target − g_reference‖ / ‖g_reference‖ */
  maxGradRelDiff?: number;
  millis?: { target: number; reference: number };
}

export const GPU_INSTALL_HINT =
  "Install recipe: packages/trainer-gpu/README.md, section 'GPU' (tfjs-node-gpu 4.22 needs CUDA 11.2 + cuDNN 8.1 and an allowed build script)";

interface Pass {
  logits: Float32Array;
  grads: Float32Array[];
  ms: number;
}

const IDS = [
  [1, 5, 9, 14, 20, 33, 41, 2, 7, 7, 60, 12, 3, 18, 25, 30],
  [4, 4, 8, 15, 16, 23, 42, 50, 61, 0, 11, 13, 17, 19, 29, 31],
];

async function forwardBackward(dir: string): Promise<Pass> {
  const { model } = await loadPretrained(dir);
  try {
    const t0 = performance.now();
    const logits = tf.tidy(() => model.logits(IDS).dataSync() as Float32Array);
    const { grads } = tf.variableGrads(
      () => tf.neg(tf.mean(model.tokenLogProbs(IDS))) as tf.Scalar,
      model.trainableVariables,
    );
    const order = model.trainableVariables.map((v) => v.name);
    const out = order.map((n) => grads[n]?.dataSync() as Float32Array);
    tf.dispose(Object.values(grads));
    return {
      logits: Float32Array.from(logits),
      grads: out.map((g) => Float32Array.from(g)),
      ms: performance.now() - t0,
    };
  } finally {
    model.dispose();
  }
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs((a[i] as number) - (b[i] as number)));
  return m;
}

function relDiff(a: Float32Array, b: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < a.length; i++) {
    num += ((a[i] as number) - (b[i] as number)) ** 2;
    den += (b[i] as number) ** 2;
  }
  return Math.sqrt(num) / Math.max(Math.sqrt(den), 1e-12);
}

export async function runGpuCheck(options: GpuCheckOptions = {}): Promise<GpuCheckResult> {
  const log = options.log ?? ((line: string) => console.info(line));
  const tolerance = options.tolerance ?? 1e-2;
  let target: BackendSelection;
  try {
    target = await selectBackend({
      backend: options.target ?? "gpu",
      log,
      importModule: options.importModule,
    });
  } catch (error) {
    const message = `No GPU backend: ${(error as Error).message}. ${GPU_INSTALL_HINT}`;
    log(`[agl] gpu:check: ${message}`);
    return { status: "no-gpu", message };
  }
  const root = await mkdtemp(join(tmpdir(), "agl-gpu-check-"));
  try {
    const dir = join(root, "tiny-qwen2");
    await writeRandomCheckpoint(dir, { family: "qwen2", seed: 7, vocabSize: 64, initStd: 0.1 });
    const onTarget = await forwardBackward(dir);
    await selectBackend({ backend: options.reference ?? "wasm", log });
    const onReference = await forwardBackward(dir);
    const maxLogitDiff = maxAbsDiff(onTarget.logits, onReference.logits);
    const maxGradRelDiff = Math.max(
      ...onTarget.grads.map((g, i) => relDiff(g, onReference.grads[i] as Float32Array)),
    );
    const ok = maxLogitDiff <= tolerance && maxGradRelDiff <= tolerance;
    const message =
      `${target.label} vs ${options.reference ?? "wasm"}: max |Δlogit| ${maxLogitDiff.toExponential(2)}, ` +
      `max relative gradient error ${maxGradRelDiff.toExponential(2)} (tolerance ${tolerance})` +
      (ok ? "" : " - MISMATCH");
    log(`[agl] gpu:check: ${message}`);
    return {
      status: ok ? "ok" : "mismatch",
      message,
      target,
      maxLogitDiff,
      maxGradRelDiff,
      millis: { target: onTarget.ms, reference: onReference.ms },
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

export const GPU_CHECK_EXIT_CODES: Record<GpuCheckStatus, number> = { ok: 0, mismatch: 1, "no-gpu": 2 };
