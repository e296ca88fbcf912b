/**
 * A store user in its own process, for multi-process tests of the durable stores:
 *   tsx test/support/store-process.ts claim <uri>     claim rollouts until the queue is empty, finish each
 *                                                     (succeeded), print {"claimed": [ids]} and exit
 *   tsx test/support/store-process.ts watchdog <uri>  keep a store open (active watchdog) until stdin
 *                                                     closes, then print {"verdicts": n} and exit
 * Prints "ready" once the store is open. Run with cwd = the repository root (tsconfig paths).
 */
import { openStore } from "@agl/store";

const [mode, uri] = process.argv.slice(2);
if (!mode || !uri) {
  console.error("usage: store-process.ts claim|watchdog <store uri>");
  process.exit(2);
}

const store = await openStore(uri, {
  sqlite: { watchdogMaxSleepMs: 100, waitPollIntervalMs: 100 },
  postgres: {
    watchdogMaxSleepMs: 100,
    waitPollIntervalMs: 100,
    poolSize: 2,
    schema: process.env.AGL_PG_SCHEMA,
  },
});
console.log("ready");

if (mode === "claim") {
  // Wait for the parent's go (a line on stdin) so every process starts claiming together.
  await new Promise<void>((resolve) => process.stdin.once("data", () => resolve()));
  process.stdin.destroy();
  const workerId = `w-${process.pid}`;
  const claimed: string[] = [];
  for (;;) {
    const batch = await store.dequeueManyRollouts({ limit: 3, workerId });
    if (batch.length === 0) break;
    for (const r of batch) {
      claimed.push(r.rollout_id);
      await store.updateAttempt(r.rollout_id, r.attempt.attempt_id, { status: "succeeded" });
    }
  }
  console.log(JSON.stringify({ claimed }));
} else if (mode === "watchdog") {
  process.stdin.resume();
  await new Promise<void>((resolve) => process.stdin.once("end", () => resolve()));
  const stats = await store.statistics();
  console.log(JSON.stringify({ verdicts: stats.watchdog_verdicts }));
} else {
  console.error(`unknown mode ${mode}`);
  process.exit(2);
}
await store.close();
