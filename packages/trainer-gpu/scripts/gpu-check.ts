/** `pnpm gpu:check`: verify the GPU path (see runGpuCheck). Exit 0 = GPU agrees with WASM, 1 = mismatch, 2 = no GPU backend. */
import { GPU_CHECK_EXIT_CODES, runGpuCheck } from "../src/diagnostics/gpu-check.js";

const result = await runGpuCheck({ target: process.argv[2] ?? "gpu" });
console.log(`gpu:check status: ${result.status}`);
process.exit(GPU_CHECK_EXIT_CODES[result.status]);
