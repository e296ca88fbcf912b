/**
 * The reliability suite at the issues' full scale (test/reliability with AGL_RELIABILITY_FULL=1): soak
 * 5,000 rollouts per backend (memory, SQLite, PostgreSQL) with 50 worker kills and 5 store outages,
 * retries on `unresponsive`; kill -9 durability; HTTP fuzz of 20,000 requests per server (deep JSON,
 * NUL keys; peak and settled RSS); relay worker restarts; Responses across proxy restarts; PostgreSQL
 * waits. One part after another (the machine has 2 cores); each part appends its JSON line of counts to
 * bench/results/reliability.jsonl, the raw source of bench/results/reliability.md. CI runs the same
 * files in their bounded form.
 *
 *   pnpm exec tsx bench/reliability.ts [part ...]   (parts: file names under test/reliability, e.g. soak fuzz-store)
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const only = process.argv.slice(2);
const parts = readdirSync(join(ROOT, "test/reliability"))
  .filter((f) => f.endsWith(".test.ts"))
  .filter((f) => only.length === 0 || only.some((o) => f.startsWith(o)))
  .sort();
const report = join(ROOT, "bench/results/reliability.jsonl");

let failed = 0;
for (const part of parts) {
  const load = loadavg()
    .map((l) => l.toFixed(1))
    .join(" / ");
  console.log(`\n=== test/reliability/${part} (full; load average ${load}) ===`);
  const result = spawnSync("pnpm", ["exec", "vitest", "run", join("test/reliability", part)], {
    cwd: ROOT,
    stdio: "inherit",
    env: { ...process.env, AGL_RELIABILITY_FULL: "1", AGL_RELIABILITY_REPORT: report },
  });
  if (result.status !== 0) {
    failed++;
    console.error(`test/reliability/${part} failed (exit ${result.status})`);
  }
}
console.log(`\n${parts.length - failed} parts passed, ${failed} failed; counts appended to ${report}`);
process.exit(failed ? 1 : 0);
