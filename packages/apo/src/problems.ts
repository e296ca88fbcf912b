import type { CandidateRejection } from "./template-check.js";

/** Everything that can go wrong in a round without stopping it. */
export type ApoProblem =
  /** An HTTP attempt of the optimiser got 429 (the SDK then backs off and retries). */
  | "rate_limited"
  /** An HTTP attempt of the optimiser got a 5xx (retried likewise). */
  | "server_error"
  /** An optimiser call still rate-limited after every retry. */
  | "rate_limit_exhausted"
  /** An optimiser call that timed out (after retries). */
  | "timeout"
  /** Any other failed optimiser call (4xx, connection refused, malformed reply). */
  | "api_error"
  /** The critique model answered with no text. */
  | "no_critique"
  /** A candidate the edit produced was not usable. */
  | CandidateRejection
  /** A rollout still unfinished when the batch timeout passed (scored 0 and cancelled). */
  | "rollout_timeout"
  /** A rollout that ended failed or cancelled. */
  | "rollout_failed";

export type ProblemCounts = Partial<Record<ApoProblem, number>>;

export class ProblemCounter {
  private readonly counts: ProblemCounts = {};

  add(problem: ApoProblem, n = 1): void {
    this.counts[problem] = (this.counts[problem] ?? 0) + n;
  }

  snapshot(): ProblemCounts {
    return { ...this.counts };
  }

  /** What was added since `before` (a snapshot). */
  since(before: ProblemCounts): ProblemCounts {
    const out: ProblemCounts = {};
    for (const [k, v] of Object.entries(this.counts) as Array<[ApoProblem, number]>) {
      const d = v - (before[k] ?? 0);
      if (d > 0) out[k] = d;
    }
    return out;
  }
}

/** The sum of two sets of counts (e.g. a resumed run's stored counts and this run's). */
export function addCounts(a: ProblemCounts, b: ProblemCounts): ProblemCounts {
  const out: ProblemCounts = { ...a };
  for (const [k, v] of Object.entries(b) as Array<[ApoProblem, number]>) out[k] = (out[k] ?? 0) + v;
  return out;
}
