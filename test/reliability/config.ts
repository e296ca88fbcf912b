/**
 * Sizes of the reliability suite. CI runs the bounded form (about a minute per part on 2 cores);
 * AGL_RELIABILITY_FULL=1 runs the full goals (soak >= 5,000 rollouts per backend with >= 50
 * worker kills and >= 5 store restarts, fuzz >= 20,000 requests per server). AGL_FUZZ_SEED replays
 * a fuzz run (with AGL_FUZZ_PATH for one failing case, as fast-check prints them).
 */
export const FULL = process.env.AGL_RELIABILITY_FULL === "1";

/** attemptTimeoutSeconds: how soon a SIGKILLed worker's attempt times out and is retried. */
export const SOAK = FULL
  ? {
      rollouts: 5000,
      workers: 4,
      workerKills: 50,
      storeRestarts: 5,
      attemptTimeoutSeconds: 15,
      timeoutMs: 40 * 60_000,
    }
  : {
      rollouts: 100,
      workers: 2,
      workerKills: 3,
      storeRestarts: 1,
      attemptTimeoutSeconds: 8,
      timeoutMs: 150_000,
    };

export const DURABILITY = FULL ? { kills: 20, writesPerKill: 150 } : { kills: 2, writesPerKill: 60 };

export const FUZZ = {
  // Bounded: 600 plus the 200-request warm-up (http-fuzz.ts), the 800 requests CI always sent.
  requests: FULL ? 20_000 : 600,
  seed: process.env.AGL_FUZZ_SEED === undefined ? 20261125 : Number(process.env.AGL_FUZZ_SEED),
  path: process.env.AGL_FUZZ_PATH,
};

/** One JSON line per finished part, for bench/results/reliability.md (set AGL_RELIABILITY_REPORT=file). */
export async function report(part: string, result: Record<string, unknown>): Promise<void> {
  const line = JSON.stringify({ part, full: FULL, at: new Date().toISOString(), ...result });
  console.log(`[reliability] ${line}`);
  const file = process.env.AGL_RELIABILITY_REPORT;
  if (file) (await import("node:fs")).appendFileSync(file, `${line}\n`);
}
