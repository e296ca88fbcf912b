import type { Logger } from "@agl/core";
import type { ProblemCounts } from "./problems.js";

export interface ApoRoundReport {
  round: number;
  parents: string[];
  /** New versions made this round. */
  candidates: string[];
  /** The beam after the round, best first, with the scores it was selected by. */
  beam: Array<{ version: string; score: number }>;
  leader: { version: string; score: number };
  optimizerCalls: number;
  rollouts: number;
  problems: ProblemCounts;
  wallMs: number;
  /** Time spent waiting on optimiser calls and rollouts (overlaps counted once). */
  waitedMs: number;
  /** wallMs - waitedMs: APO's own work (store writes, bookkeeping, adapters). */
  overheadMs: number;
}

export function logRound(logger: Logger, r: ApoRoundReport): void {
  const problems = Object.entries(r.problems)
    .map(([k, v]) => `${k}=${v}`)
    .join(" ");
  logger.info(
    `apo: round ${r.round}: beam ${r.beam.map((b) => `${b.version}:${b.score.toFixed(3)}`).join(" ")}; ` +
      `leader ${r.leader.version} ${r.leader.score.toFixed(3)} on full val; ${r.candidates.length} new, ` +
      `${r.optimizerCalls} optimiser calls, ${r.rollouts} rollouts${problems ? `; problems: ${problems}` : ""}`,
  );
}
