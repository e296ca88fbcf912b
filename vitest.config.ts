import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const src = (p: string) => fileURLToPath(new URL(`./packages/${p}`, import.meta.url));

export default defineConfig({
  resolve: {
    alias: [
      { find: /^@agl\/core\/mock-llm$/, replacement: src("core/src/mock-llm/index.ts") },
      { find: /^@agl\/core\/testing$/, replacement: src("core/src/testing/index.ts") },
      { find: /^@agl\/core$/, replacement: src("core/src/index.ts") },
      { find: /^@agl\/store$/, replacement: src("store/src/index.ts") },
      { find: /^@agl\/adapter$/, replacement: src("adapter/src/index.ts") },
      { find: /^@agl\/proxy$/, replacement: src("proxy/src/index.ts") },
      { find: /^@agl\/client$/, replacement: src("client/src/index.ts") },
      { find: /^@agl\/apo\/mock-optimizer$/, replacement: src("apo/src/mock-optimizer/index.ts") },
      { find: /^@agl\/apo$/, replacement: src("apo/src/index.ts") },
      { find: /^@agl\/trainer-gpu$/, replacement: src("trainer-gpu/src/index.ts") },
      { find: /^@agl\/dashboard$/, replacement: src("dashboard/src/index.ts") },
    ],
  },
  test: {
    include: ["packages/*/src/**/*.test.ts", "test/**/*.test.ts", "examples/*/src/**/*.test.ts"],
    exclude: ["**/node_modules/**", "**/dist/**"],
    // Safety nets for a hang, not time budgets: CI machines are shared and a run beside a CPU hog made
    // CPU-bound tests (training loops, multi-process claims) take 3-5x their idle time. Tests wait for
    // events; a test that truly hangs still fails, only later.
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: "forks",
  },
});
