import { llm } from "@agl/core";
import { type PolicyBundle, type ServeFn, servePolicy } from "@agl/trainer-gpu";
import { type Attempt, type SolveOptions, solve } from "./agent.js";
import type { Problem } from "./dataset.js";

/**
 * Run the agent against a policy directly (no store, no proxy): held-out scores outside training.
 * `serve` picks where it generates: the in-process PolicyServer (default) or an external engine
 * (`externalEngine({...})`); `solve` passes agent options (the forced-tool baseline).
 */

export interface EvalResult {
  accuracy: number;
  /** Share of problems where the model called the calculator at least once. */
  toolUse: number;
  /** Share of problems where it made two or more calls (what the task needs). */
  chained: number;
  /** Accuracy among the problems where it used the tool. */
  toolSuccess: number;
  n: number;
  /** Each episode's reward, in the order of the problems given. */
  correct: boolean[];
}

export async function evaluatePolicy(
  policy: PolicyBundle,
  problems: readonly Problem[],
  options: { temperature: number; seed: number; serve?: ServeFn; solve?: SolveOptions },
): Promise<EvalResult> {
  const { summary } = await runEpisodes(policy, problems, options);
  return summary;
}

/** The episodes themselves (transcripts included) and their summary. */
export async function runEpisodes(
  policy: PolicyBundle,
  problems: readonly Problem[],
  options: { temperature: number; seed: number; serve?: ServeFn; solve?: SolveOptions },
): Promise<{ attempts: Attempt[]; summary: EvalResult }> {
  const server = await (options.serve ?? servePolicy)(policy, { modelName: "policy" });
  try {
    const resource = llm({
      endpoint: server.url,
      model: server.servedModel?.() ?? "policy",
      ...(server.apiKey ? { api_key: server.apiKey } : {}),
      sampling_parameters: { temperature: options.temperature },
    });
    const results = await Promise.all(
      problems.map((p, i) =>
        solve(
          p,
          { llm: resource, rollout: { metadata: { seed: options.seed * 100_003 + i } } },
          options.solve,
        ),
      ),
    );
    const n = results.length;
    const withTool = results.filter((r) => r.toolCalls > 0);
    const summary: EvalResult = {
      accuracy: results.filter((r) => r.correct).length / n,
      toolUse: withTool.length / n,
      chained: results.filter((r) => r.toolCalls >= 2).length / n,
      toolSuccess: withTool.length ? withTool.filter((r) => r.correct).length / withTool.length : 0,
      n,
      correct: results.map((r) => r.correct),
    };
    return { attempts: results, summary };
  } finally {
    await server.close();
  }
}
