import * as tf from "@tensorflow/tfjs";
import { MathBackendCPU } from "@tensorflow/tfjs-backend-cpu";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  BACKEND_ORDER,
  defaultModuleLoader,
  type ModuleLoader,
  NATIVE_TF_BACKEND,
  parseBackendName,
  selectBackend,
} from "./select.js";

describe("selectBackend (real packages on this machine)", () => {
  it("forces a backend by option and logs why", async () => {
    const lines: string[] = [];
    const sel = await selectBackend({ backend: "cpu", log: (l) => lines.push(l) });
    expect(sel).toEqual({
      backend: "cpu",
      tfBackend: "cpu",
      device: "cpu",
      label: "cpu",
      skipped: [],
      forced: true,
    });
    expect(tf.getBackend()).toBe("cpu");
    expect(lines).toEqual(["[agl] tfjs backend: cpu (forced by option)"]);
  });

  it("otherwise picks the first loadable backend and names every faster one it skipped", async () => {
    const lines: string[] = [];
    const sel = await selectBackend({ log: (l) => lines.push(l) });
    const rank = BACKEND_ORDER.indexOf(sel.backend);
    expect(sel.skipped.map((s) => s.backend)).toEqual(BACKEND_ORDER.slice(0, rank));
    expect(tf.getBackend()).toBe(sel.tfBackend);
    expect(lines).toHaveLength(1);
    for (const s of sel.skipped) expect(lines[0]).toContain(`${s.backend}: ${s.reason}`);
    // Gradients are registered (tfjs-core's Node entry alone registers none).
    const g = tf.grad((x: tf.Tensor) => tf.sum(tf.square(x)))(tf.tensor1d([1, 2]));
    expect(Array.from(g.dataSync())).toEqual([2, 4]);
  });

  it("rejects unknown names", () => {
    expect(parseBackendName("GPU")).toBe("tensorflow-gpu");
    expect(() => parseBackendName("metal")).toThrow(/Unknown TensorFlow.js backend "metal"/);
  });
});

/** What `NodeJSKernelBackend` exposes about its device; the CPU kernels stand in for libtensorflow's. */
class FakeNativeBackend extends MathBackendCPU {
  constructor(readonly isUsingGpuDevice: boolean) {
    super();
  }
}

interface FakeInstall {
  gpu?: "cuda" | "no-cuda" | "broken-addon";
  node?: boolean;
}

/**
 * Stand-ins for the native packages (the real ones cannot be installed here), doing at import time what
 * their dist/index.js does: register every kernel for "tensorflow", then (after loading the addon)
 * `registerBackend("tensorflow", ..., 3)` and `setBackend("tensorflow")`. The broken one throws after the
 * kernels, as the real package does when tfjs_binding.node is missing.
 */
function fakeLoader(install: FakeInstall): { load: ModuleLoader; imported: string[] } {
  const imported: string[] = [];
  const registerNative = (gpu: boolean, addonOk = true) => {
    for (const k of tf.getKernelsForBackend("cpu"))
      tf.registerKernel({ ...k, backendName: NATIVE_TF_BACKEND });
    if (!addonOk)
      throw new Error(
        "The Node.js native addon module (tfjs_binding.node) can not be found at path: /x/lib/napi-v8/tfjs_binding.node.",
      );
    tf.registerBackend(NATIVE_TF_BACKEND, () => new FakeNativeBackend(gpu), 3);
    void tf.setBackend(NATIVE_TF_BACKEND);
  };
  const load: ModuleLoader = async (specifier) => {
    imported.push(specifier);
    if (specifier === "@tensorflow/tfjs-node-gpu" && install.gpu) {
      registerNative(install.gpu === "cuda", install.gpu !== "broken-addon");
      return {};
    }
    if (specifier === "@tensorflow/tfjs-node" && install.node) {
      registerNative(false);
      return {};
    }
    if (specifier.startsWith("@tensorflow/tfjs-node")) throw new Error(`Cannot find module '${specifier}'`);
    return defaultModuleLoader(specifier);
  };
  return { load, imported };
}

/** A fresh process as far as "tensorflow" goes (the fakes are not Node modules, so nothing is cached). */
async function forgetNative(): Promise<void> {
  await tf.setBackend("cpu");
  for (const k of tf.getKernelsForBackend(NATIVE_TF_BACKEND))
    tf.unregisterKernel(k.kernelName, NATIVE_TF_BACKEND);
  if (tf.findBackendFactory(NATIVE_TF_BACKEND)) tf.removeBackend(NATIVE_TF_BACKEND);
}

describe("selectBackend with the native packages (injected loader)", () => {
  afterEach(async () => {
    delete process.env.AGL_TF_BACKEND;
    await forgetNative();
    vi.restoreAllMocks();
  });

  it("chooses tfjs-node-gpu's 'tensorflow' backend on CUDA, labelled GPU, and imports only that package", async () => {
    const { load, imported } = fakeLoader({ gpu: "cuda", node: true });
    const lines: string[] = [];
    const sel = await selectBackend({ importModule: load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({ backend: "tensorflow-gpu", tfBackend: "tensorflow", device: "gpu" });
    expect(sel.skipped).toEqual([]);
    expect(imported).toEqual(["@tensorflow/tfjs-node-gpu"]);
    expect(tf.getBackend()).toBe("tensorflow");
    expect(lines).toEqual([
      "[agl] tfjs backend: tensorflow on GPU (@tensorflow/tfjs-node-gpu, CUDA) (fastest available)",
    ]);
    const g = tf.grad((x: tf.Tensor) => tf.sum(tf.square(x)))(tf.tensor1d([1, 2]));
    expect(Array.from(g.dataSync())).toEqual([2, 4]);
  });

  it("keeps the GPU package on the CPU when it finds no CUDA device (never imports tfjs-node too)", async () => {
    const { load, imported } = fakeLoader({ gpu: "no-cuda", node: true });
    const lines: string[] = [];
    const sel = await selectBackend({ importModule: load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({ backend: "tensorflow-gpu", tfBackend: "tensorflow", device: "cpu" });
    expect(imported).toEqual(["@tensorflow/tfjs-node-gpu"]);
    expect(lines[0]).toBe(
      "[agl] tfjs backend: tensorflow on CPU (@tensorflow/tfjs-node-gpu, no CUDA device found) (fastest available)",
    );
  });

  it("falls to tfjs-node when only it is installed, and says why the GPU package was skipped", async () => {
    const { load, imported } = fakeLoader({ node: true });
    const lines: string[] = [];
    const sel = await selectBackend({ importModule: load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({ backend: "tensorflow", tfBackend: "tensorflow", device: "cpu" });
    expect(sel.skipped).toEqual([{ backend: "tensorflow-gpu", reason: "not installed" }]);
    expect(imported).toEqual(["@tensorflow/tfjs-node-gpu", "@tensorflow/tfjs-node"]);
    expect(lines).toEqual([
      "[agl] tfjs backend: tensorflow on CPU (@tensorflow/tfjs-node) (faster ones skipped - tensorflow-gpu: not installed)",
    ]);
  });

  it("cleans up after a GPU package that fails half-way, so tfjs-node registers without clashes", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    const { load } = fakeLoader({ gpu: "broken-addon", node: true });
    const sel = await selectBackend({ importModule: load, log: () => {} });
    expect(sel).toMatchObject({ backend: "tensorflow", device: "cpu" });
    expect(sel.skipped).toEqual([
      {
        backend: "tensorflow-gpu",
        reason: "installed but its native addon is missing (its build script was blocked or failed)",
      },
    ]);
    expect(warn.mock.calls.filter((c) => /already registered/.test(String(c[0])))).toEqual([]);
    expect(tf.getBackend()).toBe("tensorflow");
  });

  it("falls to wasm without native packages", async () => {
    const { load, imported } = fakeLoader({});
    const lines: string[] = [];
    const sel = await selectBackend({ importModule: load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({ backend: "wasm", tfBackend: "wasm", device: "wasm" });
    expect(imported).toEqual([
      "@tensorflow/tfjs-node-gpu",
      "@tensorflow/tfjs-node",
      "@tensorflow/tfjs-backend-wasm",
    ]);
    expect(lines).toEqual([
      "[agl] tfjs backend: wasm (faster ones skipped - tensorflow-gpu: not installed; tensorflow: not installed)",
    ]);
  });

  it("forcing gpu by option works on CUDA and is an error without a CUDA device", async () => {
    const cuda = fakeLoader({ gpu: "cuda", node: true });
    const lines: string[] = [];
    const sel = await selectBackend({ backend: "gpu", importModule: cuda.load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({
      backend: "tensorflow-gpu",
      tfBackend: "tensorflow",
      device: "gpu",
      forced: true,
    });
    expect(cuda.imported).toEqual(["@tensorflow/tfjs-node-gpu"]);
    expect(lines).toEqual([
      "[agl] tfjs backend: tensorflow on GPU (@tensorflow/tfjs-node-gpu, CUDA) (forced by option)",
    ]);
    await forgetNative();
    const noCuda = fakeLoader({ gpu: "no-cuda" });
    await expect(selectBackend({ backend: "gpu", importModule: noCuda.load, log: () => {} })).rejects.toThrow(
      'Forced TensorFlow.js backend "tensorflow-gpu" loaded but found no CUDA device',
    );
    const missing = fakeLoader({ node: true });
    await expect(
      selectBackend({ backend: "gpu", importModule: missing.load, log: () => {} }),
    ).rejects.toThrow('Forced TensorFlow.js backend "tensorflow-gpu" failed to load: not installed');
  });

  it("honours AGL_TF_BACKEND and says so in the log line", async () => {
    process.env.AGL_TF_BACKEND = "gpu";
    const gpu = fakeLoader({ gpu: "cuda", node: true });
    const lines: string[] = [];
    const sel = await selectBackend({ importModule: gpu.load, log: (l) => lines.push(l) });
    expect(sel).toMatchObject({ backend: "tensorflow-gpu", device: "gpu", forced: true });
    expect(lines).toEqual([
      "[agl] tfjs backend: tensorflow on GPU (@tensorflow/tfjs-node-gpu, CUDA) (forced by AGL_TF_BACKEND)",
    ]);

    process.env.AGL_TF_BACKEND = "cpu";
    const cpu = fakeLoader({ gpu: "cuda", node: true });
    const cpuLines: string[] = [];
    const forcedCpu = await selectBackend({ importModule: cpu.load, log: (l) => cpuLines.push(l) });
    expect(forcedCpu).toMatchObject({ backend: "cpu", tfBackend: "cpu", forced: true });
    expect(cpu.imported).toEqual(["@tensorflow/tfjs-backend-cpu"]);
    expect(cpuLines).toEqual(["[agl] tfjs backend: cpu (forced by AGL_TF_BACKEND)"]);
    // The option wins over the environment.
    await forgetNative();
    const opt = await selectBackend({ backend: "tensorflow", importModule: cpu.load, log: () => {} });
    expect(opt).toMatchObject({ backend: "tensorflow", device: "cpu", forced: true });

    process.env.AGL_TF_BACKEND = "metal";
    await expect(selectBackend({ importModule: cpu.load, log: () => {} })).rejects.toThrow(/Unknown/);
  });
});

describe("native package resolution", () => {
  it("finds a native package installed by the application (working directory), not only next to this package", async () => {
    const { mkdtempSync, mkdirSync, writeFileSync, rmSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const app = mkdtempSync(join(tmpdir(), "agl-app-"));
    const pkg = join(app, "node_modules", "@tensorflow", "tfjs-node-gpu");
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true }));
    writeFileSync(
      join(pkg, "package.json"),
      JSON.stringify({ name: "@tensorflow/tfjs-node-gpu", main: "index.js" }),
    );
    writeFileSync(join(pkg, "index.js"), "module.exports = {};");
    const cwd = process.cwd();
    try {
      process.chdir(app);
      // Found in the app now; its addon was never built (the blocked install script), which is the error.
      await expect(defaultModuleLoader("@tensorflow/tfjs-node-gpu")).rejects.toThrow(
        /tfjs_binding\.node missing/,
      );
    } finally {
      process.chdir(cwd);
      rmSync(app, { recursive: true, force: true });
    }
  });
});
