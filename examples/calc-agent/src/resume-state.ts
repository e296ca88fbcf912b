import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { EvalResult } from "./evaluate.js";

/**
 * What `--resume` needs from the interrupted run that the PPO checkpoint does not hold: the test accuracy
 * of the best SFT checkpoint (the "before" row; re-measuring it on a resumed checkpoint would report the
 * RL policy as the baseline) and the seconds SFT took, so the reported time covers the whole run.
 */

export interface WarmStartRecord {
  seed: number;
  /** Seconds from the start of the run to the end of the best checkpoint's test evaluation. */
  seconds: number;
  greedy: EvalResult;
  sampled: EvalResult;
}

export const WARM_START_FILE = "warm-start.json";

export function saveWarmStart(out: string, record: WarmStartRecord): void {
  writeFileSync(join(out, WARM_START_FILE), `${JSON.stringify(record, null, 2)}\n`);
}

const isEval = (v: unknown): v is EvalResult =>
  typeof v === "object" &&
  v !== null &&
  ["accuracy", "toolUse", "toolSuccess", "n"].every(
    (k) => typeof (v as Record<string, unknown>)[k] === "number",
  );

/** The saved record, or null when there is none; a malformed or other-seed file is an error naming it. */
export function loadWarmStart(out: string, seed: number): WarmStartRecord | null {
  const path = join(out, WARM_START_FILE);
  if (!existsSync(path)) return null;
  // Validated by hand: this example keeps to the dependencies a user's agent would have (no zod).
  const r = JSON.parse(readFileSync(path, "utf8")) as Partial<WarmStartRecord>;
  const ok =
    typeof r.seed === "number" && typeof r.seconds === "number" && isEval(r.greedy) && isEval(r.sampled);
  if (!ok) throw new Error(`${path} is not a warm-start record`);
  if (r.seed !== seed) throw new Error(`${path} is from a run with --seed ${r.seed}, not ${seed}`);
  return r as WarmStartRecord;
}

/** RL seconds already spent (for the total time of a resumed run), from the metrics history a PPO checkpoint carries (steps + validations). */
export function rlSecondsSoFar(history: readonly { metrics: Record<string, number | undefined> }[]): number {
  return history.reduce(
    (sum, h) => sum + (h.metrics["timing_s/step"] ?? 0) + (h.metrics["timing_s/testing"] ?? 0),
    0,
  );
}
