import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import * as tf from "@tensorflow/tfjs";

/**
 * Run-time backend selection. The native bindings are optional peers (their installers download
 * libtensorflow, impossible on offline machines), so each candidate is loaded with a dynamic import
 * and a failure only moves us to the next, slower one.
 */
export type BackendName = "tensorflow-gpu" | "tensorflow" | "wasm" | "cpu";

export const BACKEND_ORDER: readonly BackendName[] = ["tensorflow-gpu", "tensorflow", "wasm", "cpu"];

const ALIASES: Record<string, BackendName> = {
  "tensorflow-gpu": "tensorflow-gpu",
  "tfjs-node-gpu": "tensorflow-gpu",
  gpu: "tensorflow-gpu",
  tensorflow: "tensorflow",
  "tfjs-node": "tensorflow",
  node: "tensorflow",
  native: "tensorflow",
  wasm: "wasm",
  cpu: "cpu",
};

export interface BackendSelection {
  /** The backend now active in tfjs. */
  backend: BackendName;
  /** Why each faster candidate was not used (empty when the first choice loaded). */
  skipped: Array<{ backend: BackendName; reason: string }>;
  /** Whether the choice was forced by option or `AGL_TF_BACKEND`. */
  forced: boolean;
}

export interface SelectBackendOptions {
  /** Force one backend (also `AGL_TF_BACKEND`); failing to load a forced backend is an error. */
  backend?: string;
  /** Where the one log line goes (default `console.info`); pass `() => {}` to silence. */
  log?: (line: string) => void;
}

let current: Promise<BackendSelection> | undefined;
let currentKey: string | undefined;

export function parseBackendName(name: string): BackendName {
  const b = ALIASES[name.trim().toLowerCase()];
  if (!b)
    throw new Error(`Unknown TensorFlow.js backend "${name}"; expected one of ${BACKEND_ORDER.join(", ")}`);
  return b;
}

const require = createRequire(import.meta.url);

/**
 * A native package whose addon was never built throws only after registering half its kernels (and
 * then floods the console with "already registered" when the next one loads), so check the addon first.
 */
function assertNativeAddon(pkg: string): void {
  let root: string;
  try {
    root = dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    throw new Error(`Cannot find module '${pkg}'`);
  }
  const lib = join(root, "lib");
  const built =
    existsSync(lib) && readdirSync(lib).some((d) => existsSync(join(lib, d, "tfjs_binding.node")));
  if (!built) throw new Error(`${pkg}: tfjs_binding.node missing`);
}

async function tryLoad(name: BackendName): Promise<void> {
  // Variables keep bundlers from resolving the optional peers at build time.
  const nodeGpu = "@tensorflow/tfjs-node-gpu";
  const node = "@tensorflow/tfjs-node";
  switch (name) {
    case "tensorflow-gpu":
      assertNativeAddon(nodeGpu);
      await import(nodeGpu);
      break;
    case "tensorflow":
      assertNativeAddon(node);
      await import(node);
      break;
    case "wasm": {
      const wasm = await import("@tensorflow/tfjs-backend-wasm");
      const dist = dirname(require.resolve("@tensorflow/tfjs-backend-wasm"));
      // In Node the .wasm files are not found relative to the bundle: point at the package's dist.
      wasm.setWasmPaths(`${join(dist, "/")}`.replace(/\/?$/, "/"));
      break;
    }
    case "cpu":
      await import("@tensorflow/tfjs-backend-cpu");
      break;
  }
  const ok = await tf.setBackend(name);
  if (!ok || tf.getBackend() !== name) throw new Error(`tf.setBackend("${name}") returned false`);
  await tf.ready();
}

function shortReason(error: unknown): string {
  const msg = error instanceof Error ? error.message : String(error);
  const firstLine = msg.split("\n")[0] ?? msg;
  if (/Cannot find (module|package)/i.test(firstLine)) return "not installed";
  if (/tfjs_binding\.node/.test(firstLine)) return "installed but its native addon is missing";
  return firstLine.length > 160 ? `${firstLine.slice(0, 157)}...` : firstLine;
}

async function select(options: SelectBackendOptions): Promise<BackendSelection> {
  const log = options.log ?? ((line: string) => console.info(line));
  const forcedName = options.backend ?? process.env.AGL_TF_BACKEND;
  if (forcedName) {
    const backend = parseBackendName(forcedName);
    try {
      await tryLoad(backend);
    } catch (error) {
      throw new Error(`Forced TensorFlow.js backend "${backend}" failed to load: ${shortReason(error)}`);
    }
    const why = options.backend ? "forced by option" : "forced by AGL_TF_BACKEND";
    log(`[agl] tfjs backend: ${backend} (${why})`);
    return { backend, skipped: [], forced: true };
  }
  const skipped: BackendSelection["skipped"] = [];
  for (const backend of BACKEND_ORDER) {
    try {
      await tryLoad(backend);
      const why = skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ");
      log(
        `[agl] tfjs backend: ${backend}${why ? ` (faster ones skipped - ${why})` : " (fastest available)"}`,
      );
      return { backend, skipped, forced: false };
    } catch (error) {
      skipped.push({ backend, reason: shortReason(error) });
    }
  }
  throw new Error(
    `No TensorFlow.js backend could be loaded: ${skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ")}`,
  );
}

/**
 * Select and activate the fastest available backend: tfjs-node-gpu, tfjs-node, wasm, cpu. Idempotent
 * per requested backend (repeated calls share one selection), so libraries can call it defensively.
 * Importing `@tensorflow/tfjs` (done by this module) registers the gradients that tfjs-core's Node
 * entry alone does not.
 */
export function selectBackend(options: SelectBackendOptions = {}): Promise<BackendSelection> {
  const key = options.backend ?? process.env.AGL_TF_BACKEND ?? "auto";
  if (!current || currentKey !== key) {
    currentKey = key;
    current = select(options).catch((error) => {
      current = undefined;
      throw error;
    });
  }
  return current;
}
