import { defineConfig } from "tsup";

export default defineConfig({
  // The worker thread entry sits next to the bundle (see parallel/pool.ts workerEntry).
  entry: { index: "src/index.ts", "policy-worker": "src/parallel/worker.ts" },
  format: ["esm"],
  dts: true,
  sourcemap: true,
  clean: true,
  target: "node20",
  splitting: true,
});
