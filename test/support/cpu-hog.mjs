#!/usr/bin/env node
/**
 * A CPU hog for proving tests load-proof: busy-loops one worker thread per core (or `--threads N`)
 * for `--seconds S` (default 600), then exits. Run the suite beside it, e.g.
 *   node test/support/cpu-hog.mjs --seconds 900 & pnpm exec vitest run test/cli/; kill %1
 */
import { availableParallelism } from "node:os";
import { isMainThread, Worker } from "node:worker_threads";

if (isMainThread) {
  const arg = (name, fallback) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? Number(process.argv[i + 1]) : fallback;
  };
  const threads = arg("threads", availableParallelism());
  const seconds = arg("seconds", 600);
  const until = Date.now() + seconds * 1000;
  for (let i = 0; i < threads; i++) new Worker(new URL(import.meta.url), { workerData: until });
  process.stderr.write(`cpu-hog: ${threads} threads for ${seconds} s (pid ${process.pid})\n`);
} else {
  const { workerData } = await import("node:worker_threads");
  let x = 0;
  while (Date.now() < workerData) for (let i = 0; i < 1e6; i++) x = (x * 31 + i) | 0;
}
