import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { GPU_CHECK_EXIT_CODES, runGpuCheck } from "./gpu-check.js";

const repoRoot = fileURLToPath(new URL("../../../..", import.meta.url));

describe("gpu:check", () => {
  // This machine and CI have no tfjs-node-gpu (it is never installed implicitly); the CLI test below runs the
  // real loader, the others inject what the loader sees.
  it("says clearly that there is no GPU backend when tfjs-node-gpu is not installed", async () => {
    const lines: string[] = [];
    const result = await runGpuCheck({
      log: (l) => lines.push(l),
      importModule: async (s) => {
        throw new Error(`Cannot find module '${s}'`);
      },
    });
    expect(result.status).toBe("no-gpu");
    expect(result.message).toMatch(/No GPU backend: .*"tensorflow-gpu" failed to load: not installed/);
    expect(result.message).toMatch(/CUDA 11\.2 \+ cuDNN 8\.1/);
    expect(lines.join("\n")).toContain("No GPU backend");
  });

  it("names a blocked build (package present, native addon missing) and a missing CUDA device", async () => {
    const noAddon = await runGpuCheck({
      log: () => {},
      importModule: async (s) => {
        throw new Error(`${s}: tfjs_binding.node missing`);
      },
    });
    expect(noAddon.status).toBe("no-gpu");
    expect(noAddon.message).toMatch(/native addon is missing \(its build script was blocked or failed\)/);
  });

  it("the CLI exits 2 with the reason", async () => {
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      execFile(
        process.execPath,
        ["--import", "tsx", "packages/trainer-gpu/scripts/gpu-check.ts"],
        { cwd: repoRoot },
        (error, out) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout: out }),
      );
    });
    expect(code).toBe(GPU_CHECK_EXIT_CODES["no-gpu"]);
    expect(stdout).toMatch(/No GPU backend/);
    expect(stdout).toMatch(/gpu:check status: no-gpu/);
  });

  it("compares forward logits and gradients of a tiny checkpoint between two backends", async () => {
    // The comparison path, with the CPU backend standing in for the GPU (both must agree with WASM).
    const result = await runGpuCheck({ target: "cpu", log: () => {} });
    expect(result.status).toBe("ok");
    expect(result.target?.backend).toBe("cpu");
    expect(result.maxLogitDiff).toBeLessThan(1e-4);
    expect(result.maxGradRelDiff).toBeLessThan(1e-4);
    expect(result.millis?.target).toBeGreaterThan(0);
  });
});
