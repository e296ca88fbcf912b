import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import * as tf from "@tensorflow/tfjs";

/**
 * Run-time backend selection. The native bindings are optional peers (their installers download
 * libtensorflow, impossible on offline machines), so each candidate is loaded with a dynamic import
 * and a failure only moves us to the next, slower one.
 *
 * Both native packages register their backend under the same tfjs name, "tensorflow" (the GPU package
 * differs only in the libtensorflow it links), so the candidates below are *packages*, and what tfjs
 * runs on is reported separately (`tfBackend`, `device`).
 */
export type BackendName = "tensorflow-gpu" | "tensorflow" | "wasm" | "cpu";

export const BACKEND_ORDER: readonly BackendName[] = ["tensorflow-gpu", "tensorflow", "wasm", "cpu"];

/** The name both `@tensorflow/tfjs-node` and `@tensorflow/tfjs-node-gpu` register with tfjs. */
export const NATIVE_TF_BACKEND = "tensorflow";

export const NATIVE_PACKAGES = {
  "tensorflow-gpu": "@tensorflow/tfjs-node-gpu",
  tensorflow: "@tensorflow/tfjs-node",
} as const;

const ALIASES: Record<string, BackendName> = {
  "tensorflow-gpu": "tensorflow-gpu",
  "tfjs-node-gpu": "tensorflow-gpu",
  gpu: "tensorflow-gpu",
  cuda: "tensorflow-gpu",
  tensorflow: "tensorflow",
  "tfjs-node": "tensorflow",
  node: "tensorflow",
  native: "tensorflow",
  wasm: "wasm",
  cpu: "cpu",
};

export interface BackendSelection {
  /** The candidate that was chosen (which package provides the backend). */
  backend: BackendName;
  /** The tfjs backend now active (`tf.getBackend()`): "tensorflow" for both native packages. */
  tfBackend: string;
  /** Where the math runs. */
  device: "gpu" | "cpu" | "wasm";
  /** Human-readable description, as in the log line. */
  label: string;
  /** Why each faster candidate was not used (empty when the first choice loaded). */
  skipped: Array<{ backend: BackendName; reason: string }>;
  /** Whether the choice was forced by option or `AGL_TF_BACKEND`. */
  forced: boolean;
}

/** Loads a package by specifier; injectable so tests can stand in for the native packages. */
export type ModuleLoader = (specifier: string) => Promise<unknown>;

export interface SelectBackendOptions {
  /** Force one backend (also `AGL_TF_BACKEND`); failing to load a forced backend is an error. */
  backend?: string;
  /** Where the one log line goes (default `console.info`); pass `() => {}` to silence. */
  log?: (line: string) => void;
  /**
   * How packages are loaded (default: dynamic `import()`, after checking that a native package's addon was
   * built). A custom loader also bypasses the per-process memo of the selection.
   */
  importModule?: ModuleLoader;
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
 * Where a native package is installed. They are not dependencies of this package (their install script
 * downloads libtensorflow, which must never run implicitly): the application installs one, so look it up
 * from the working directory first (the app, or this workspace's root), then from this package.
 */
export function resolveNativePackage(pkg: string): { packageJson: string; entry: string } {
  for (const from of [join(process.cwd(), "package.json"), import.meta.url]) {
    const req = createRequire(from);
    try {
      return { packageJson: req.resolve(`${pkg}/package.json`), entry: req.resolve(pkg) };
    } catch {
      // not installed there
    }
  }
  throw new Error(`Cannot find module '${pkg}'`);
}

/**
 * A native package whose addon was never built throws only after registering half its kernels (and
 * then floods the console with "already registered" when the next one loads), so check the addon first.
 */
function assertNativeAddon(pkg: string, packageJson: string): void {
  const lib = join(dirname(packageJson), "lib");
  const built =
    existsSync(lib) && readdirSync(lib).some((d) => existsSync(join(lib, d, "tfjs_binding.node")));
  if (!built) throw new Error(`${pkg}: tfjs_binding.node missing`);
}

const NATIVE_SPECIFIERS: ReadonlySet<string> = new Set(Object.values(NATIVE_PACKAGES));

export const defaultModuleLoader: ModuleLoader = async (specifier) => {
  if (!NATIVE_SPECIFIERS.has(specifier)) return import(specifier);
  const { packageJson, entry } = resolveNativePackage(specifier);
  assertNativeAddon(specifier, packageJson);
  return import(pathToFileURL(entry).href);
};

/**
 * Undo what a native package that threw half-way through its import left behind (kernels registered for
 * "tensorflow", maybe the backend itself), so the other native package can register cleanly.
 */
function forgetNativeBackend(): void {
  for (const k of tf.getKernelsForBackend(NATIVE_TF_BACKEND))
    tf.unregisterKernel(k.kernelName, NATIVE_TF_BACKEND);
  if (tf.findBackendFactory(NATIVE_TF_BACKEND)) tf.removeBackend(NATIVE_TF_BACKEND);
}

async function activate(name: string): Promise<void> {
  const ok = await tf.setBackend(name);
  if (!ok || tf.getBackend() !== name) throw new Error(`tf.setBackend("${name}") returned false`);
  await tf.ready();
}

/** Whether the active native backend runs on a CUDA device (`NodeJSKernelBackend.isUsingGpuDevice`). */
function nativeUsesGpu(): boolean {
  return (tf.backend() as unknown as { isUsingGpuDevice?: boolean }).isUsingGpuDevice === true;
}

interface Loaded {
  tfBackend: string;
  device: BackendSelection["device"];
  label: string;
}

/** Import one native package and activate the "tensorflow" backend it registers. */
async function loadNative(candidate: "tensorflow-gpu" | "tensorflow", load: ModuleLoader): Promise<Loaded> {
  const pkg = NATIVE_PACKAGES[candidate];
  try {
    await load(pkg);
    await activate(NATIVE_TF_BACKEND);
  } catch (error) {
    forgetNativeBackend();
    throw error;
  }
  const gpu = nativeUsesGpu();
  return {
    tfBackend: NATIVE_TF_BACKEND,
    device: gpu ? "gpu" : "cpu",
    label: gpu
      ? `${NATIVE_TF_BACKEND} on GPU (${pkg}, CUDA)`
      : `${NATIVE_TF_BACKEND} on CPU (${pkg}${candidate === "tensorflow-gpu" ? ", no CUDA device found" : ""})`,
  };
}

async function tryLoad(name: BackendName, load: ModuleLoader): Promise<Loaded> {
  switch (name) {
    case "tensorflow-gpu":
    case "tensorflow":
      return loadNative(name, load);
    case "wasm": {
      const wasm = (await load(
        "@tensorflow/tfjs-backend-wasm",
      )) as typeof import("@tensorflow/tfjs-backend-wasm");
      const dist = dirname(require.resolve("@tensorflow/tfjs-backend-wasm"));
      // In Node the .wasm files are not found relative to the bundle: point at the package's dist.
      wasm.setWasmPaths(`${join(dist, "/")}`.replace(/\/?$/, "/"));
      await activate("wasm");
      return { tfBackend: "wasm", device: "wasm", label: "wasm" };
    }
    case "cpu":
      await load("@tensorflow/tfjs-backend-cpu");
      await activate("cpu");
      return { tfBackend: "cpu", device: "cpu", label: "cpu" };
  }
}

function shortReason(error: unknown): string {
  const msg = error instanceof Error ? error.message : String(error);
  const firstLine = msg.split("\n")[0] ?? msg;
  if (/Cannot find (module|package)/i.test(firstLine)) return "not installed";
  if (/tfjs_binding\.node/.test(firstLine))
    return "installed but its native addon is missing (its build script was blocked or failed)";
  return firstLine.length > 160 ? `${firstLine.slice(0, 157)}...` : firstLine;
}

async function select(options: SelectBackendOptions): Promise<BackendSelection> {
  const log = options.log ?? ((line: string) => console.info(line));
  const load = options.importModule ?? defaultModuleLoader;
  const forcedName = options.backend ?? process.env.AGL_TF_BACKEND;
  if (forcedName) {
    const backend = parseBackendName(forcedName);
    let loaded: Loaded;
    try {
      loaded = await tryLoad(backend, load);
    } catch (error) {
      throw new Error(`Forced TensorFlow.js backend "${backend}" failed to load: ${shortReason(error)}`);
    }
    // Asking for the GPU and silently training on the CPU would be the worst outcome.
    if (backend === "tensorflow-gpu" && loaded.device !== "gpu")
      throw new Error(`Forced TensorFlow.js backend "${backend}" loaded but found no CUDA device`);
    const why = options.backend ? "forced by option" : "forced by AGL_TF_BACKEND";
    log(`[agl] tfjs backend: ${loaded.label} (${why})`);
    return { backend, ...loaded, skipped: [], forced: true };
  }
  const skipped: BackendSelection["skipped"] = [];
  for (const backend of BACKEND_ORDER) {
    let loaded: Loaded;
    try {
      loaded = await tryLoad(backend, load);
    } catch (error) {
      skipped.push({ backend, reason: shortReason(error) });
      continue;
    }
    // The GPU package without a CUDA device still works (on the CPU; its label says so), and importing
    // tfjs-node next to it would register every "tensorflow" kernel twice: keep it.
    const why = skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ");
    log(
      `[agl] tfjs backend: ${loaded.label}${why ? ` (faster ones skipped - ${why})` : " (fastest available)"}`,
    );
    return { backend, ...loaded, skipped, forced: false };
  }
  throw new Error(
    `No TensorFlow.js backend could be loaded: ${skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ")}`,
  );
}

/**
 * Select and activate the fastest available backend: tfjs-node-gpu (CUDA), tfjs-node, wasm, cpu.
 * Idempotent per requested backend (repeated calls share one selection), so libraries can call it
 * defensively. Importing `@tensorflow/tfjs` (done by this module) registers the gradients that
 * tfjs-core's Node entry alone does not.
 */
export function selectBackend(options: SelectBackendOptions = {}): Promise<BackendSelection> {
  if (options.importModule) return select(options);
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
