import type { Attempt } from "./agent.js";
import { expressionOf, type Problem } from "./dataset.js";

/**
 * Where an episode goes wrong, step by step against the problem's two-call solution: the first call's
 * expression, then the second call's carried result (the first result), its operator and its operand (the
 * question's third number; when wrong, whether the model copied one of the first call's operands instead),
 * then the final answer. Teacher-forced copy accuracy (src/copy-accuracy.ts) scores digits given a perfect
 * prefix; this scores what the policy writes on its own, which is what a reward sees.
 */
export interface EpisodeReport {
  /** Calculator calls the policy made (the agent allows two, then wants the answer). */
  calls: number;
  firstCall: "right" | "wrong" | "none";
  carried: "right" | "wrong" | "none";
  operator: "right" | "wrong" | "none";
  secondOperand: "right" | "first call's a" | "first call's b" | "other" | "none";
  /** The final answer when the policy gave one without a second call ("I think 352-65 = 287."). */
  inHead: "right" | "wrong" | "none";
  correct: boolean;
}

const callExpressions = (attempt: Attempt): string[] =>
  attempt.messages.flatMap((m) => {
    if (m.role !== "assistant" || !("tool_calls" in m) || !m.tool_calls) return [];
    return m.tool_calls.map((c) => {
      if (c.type !== "function") return "";
      try {
        const args: unknown = JSON.parse(c.function.arguments);
        const expr = typeof args === "object" && args !== null ? (args as { expr?: unknown }).expr : "";
        return typeof expr === "string" ? expr.replace(/\s+/g, "") : "";
      } catch {
        return "";
      }
    });
  });

export function classifyEpisode(problem: Problem, attempt: Attempt): EpisodeReport {
  const [first, second] = problem.steps;
  const calls = callExpressions(attempt);
  const report: EpisodeReport = {
    calls: calls.length,
    firstCall: calls[0] === undefined ? "none" : calls[0] === expressionOf(first) ? "right" : "wrong",
    carried: "none",
    operator: "none",
    secondOperand: "none",
    inHead: "none",
    correct: attempt.correct,
  };
  const two = calls[1]?.match(/^(-?\d+)([-+*])(-?\d+)$/);
  if (calls[1] !== undefined) {
    report.carried = two && Number(two[1]) === second.a ? "right" : "wrong";
    report.operator = two && two[2] === second.op ? "right" : "wrong";
    const b = two ? Number(two[3]) : Number.NaN;
    report.secondOperand =
      b === second.b
        ? "right"
        : b === first.a
          ? "first call's a"
          : b === first.b
            ? "first call's b"
            : "other";
  } else if (calls.length === 1 && attempt.answer !== null) {
    report.inHead = attempt.correct ? "right" : "wrong";
  }
  return report;
}

/** Counts of each field's values over the episodes, e.g. `{ "secondOperand=right": 12, ... }`. */
export function tallyEpisodes(reports: readonly EpisodeReport[]): Record<string, number> {
  const tally: Record<string, number> = {};
  for (const r of reports)
    for (const [k, v] of Object.entries(r)) {
      if (v === "none") continue;
      const key = `${k}=${v}`;
      tally[key] = (tally[key] ?? 0) + 1;
    }
  return tally;
}
