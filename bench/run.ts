/**
 * `pnpm bench`: runs every benchmark script in bench/ one after another (never in parallel: the
 * machine has 2 cores and each script measures ratios within its own run).
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const only = process.argv.slice(2);
const scripts = readdirSync(here)
  .filter((f) => f.endsWith(".ts") && f !== "run.ts")
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort();

let failed = 0;
for (const script of scripts) {
  console.log(`\n=== bench/${script} ===`);
  const result = spawnSync("pnpm", ["exec", "tsx", join(here, script)], { stdio: "inherit" });
  if (result.status !== 0) {
    failed++;
    console.error(`bench/${script} exited with ${result.status}`);
  }
}
console.log(`\n${scripts.length - failed} benchmarks finished, ${failed} failed; results in bench/results/`);
process.exit(failed ? 1 : 0);
