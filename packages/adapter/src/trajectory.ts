import { InvalidArgumentError, type Triplet } from "@agl/core";
import type { AdapterResult, DiagnosingAdapter } from "./adapter.js";
import { DiagnosticsCollector } from "./diagnostics.js";
import { parseOptions, TrajectoryOptionsSchema } from "./options.js";

/**
 * One training row. `prompt_token_ids` is the first call's prompt; `response_token_ids` is everything
 * after it: response 1, the observation tokens the harness inserted before call 2's prompt, response 2,
 * and so on. `response_mask` is 1 on tokens the policy generated and 0 on inserted ones.
 */
export interface TrajectorySequence {
  prompt_token_ids: number[];
  response_token_ids: number[];
  response_mask: number[];
  /** Per response token (0 on inserted tokens); null when any merged turn lacked usable logprobs. */
  response_logprobs: number[] | null;
  /** The last non-null reward among the merged calls (Agent Lightning v1 puts the reward on the last call). */
  reward: number | null;
  /** Indices of the merged triplets in the input. */
  triplet_indices: number[];
}

export interface PrefixMismatch {
  /** Index (in the input) of the triplet whose prompt did not extend the running context. */
  tripletIndex: number;
  /** First position where the prompt differs from (or ends inside) the running context. */
  position: number;
  expected: number | null;
  actual: number | null;
}

export interface TrajectoryOptions {
  /**
   * "trajectory" (default) merges consecutive calls whose prompt extends the running context token
   * for token; "transition" makes one row per call.
   */
  mode?: "trajectory" | "transition";
}

function tokenIds(side: unknown): number[] {
  const ids = (side as { token_ids?: unknown } | null)?.token_ids;
  return Array.isArray(ids) ? (ids as number[]) : [];
}

function logprobsOf(triplet: Triplet, length: number): number[] | null {
  const lp = (triplet.response as { logprobs?: unknown } | null)?.logprobs;
  if (!Array.isArray(lp) || lp.length !== length) return null;
  return lp.every((x) => typeof x === "number" && Number.isFinite(x)) ? (lp as number[]) : null;
}

/**
 * Triplets of ONE rollout (in call order) → training rows (Agent Lightning v1 "trajectory mode").
 * A prompt that does not extend the previous prompt + response (chat-template drift, history
 * rewriting, truncation) starts a new row; the mismatch position is reported.
 */
export class TripletsToTrajectories implements DiagnosingAdapter<Triplet[], TrajectorySequence[]> {
  readonly name = "TripletsToTrajectories";
  private readonly mode: "trajectory" | "transition";

  constructor(options: TrajectoryOptions = {}) {
    parseOptions(TrajectoryOptionsSchema, options, "options");
    this.mode = options.mode ?? "trajectory";
  }

  adapt(triplets: Triplet[]): TrajectorySequence[] {
    return this.adaptWithDiagnostics(triplets).output;
  }

  adaptWithDiagnostics(triplets: Triplet[]): AdapterResult<TrajectorySequence[]> {
    if (!Array.isArray(triplets)) throw new InvalidArgumentError("triplets", "expected an array of triplets");
    const diagnostics = new DiagnosticsCollector();
    const rows: TrajectorySequence[] = [];
    let row: TrajectorySequence | null = null;
    let context: number[] = [];
    let logprobsOk = true;

    const flush = () => {
      if (!row) return;
      if (!logprobsOk) row.response_logprobs = null;
      rows.push(row);
      row = null;
    };

    triplets.forEach((triplet, index) => {
      const prompt = tokenIds(triplet.prompt);
      const response = tokenIds(triplet.response);
      if (prompt.length === 0 || response.length === 0) {
        diagnostics.add(
          "missing_token_ids",
          "warning",
          `triplet ${index} has no ${prompt.length === 0 ? "prompt" : "response"} token ids; skipped`,
          {
            details: { tripletIndex: index },
          },
        );
        return;
      }
      const lp = logprobsOf(triplet, response.length);
      if (!lp) {
        diagnostics.add(
          "logprobs_unusable",
          "info",
          `triplet ${index}: logprobs missing or not one per response token; the row's logprobs become null`,
          {
            details: { tripletIndex: index },
          },
        );
      }
      let extended = false;
      if (row && this.mode === "trajectory") {
        const k = firstDifference(context, prompt);
        if (k === -1) extended = true;
        else {
          const mismatch: PrefixMismatch = {
            tripletIndex: index,
            position: k,
            expected: context[k] ?? null,
            actual: prompt[k] ?? null,
          };
          diagnostics.add(
            "prefix_mismatch",
            "warning",
            `triplet ${index}: prompt does not extend the previous prompt+response at token ${k} (expected ${mismatch.expected}, got ${mismatch.actual}); started a new row`,
            { details: { ...mismatch } },
          );
        }
      }
      if (extended && row) {
        const current: TrajectorySequence = row;
        const observation = prompt.slice(context.length);
        for (const t of observation) {
          current.response_token_ids.push(t);
          current.response_mask.push(0);
          current.response_logprobs?.push(0);
        }
        for (let i = 0; i < response.length; i++) {
          current.response_token_ids.push(response[i]!);
          current.response_mask.push(1);
          current.response_logprobs?.push(lp ? lp[i]! : 0);
        }
        if (triplet.reward !== null && triplet.reward !== undefined) current.reward = triplet.reward;
        current.triplet_indices.push(index);
        if (!lp) logprobsOk = false;
      } else {
        flush();
        row = {
          prompt_token_ids: prompt.slice(),
          response_token_ids: response.slice(),
          response_mask: new Array(response.length).fill(1),
          response_logprobs: lp ? lp.slice() : [],
          reward: triplet.reward ?? null,
          triplet_indices: [index],
        };
        logprobsOk = lp !== null;
      }
      context = prompt.concat(response);
    });
    flush();
    return { output: rows, diagnostics: diagnostics.report() };
  }
}

/** -1 when `prompt` starts with all of `context`; else the first index where they differ. */
function firstDifference(context: number[], prompt: number[]): number {
  const n = Math.min(context.length, prompt.length);
  for (let i = 0; i < n; i++) if (context[i] !== prompt[i]) return i;
  return prompt.length >= context.length ? -1 : prompt.length;
}
