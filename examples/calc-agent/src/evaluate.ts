import { llm } from "@agl/core";
import { type PolicyBundle, type ServeFn, servePolicy } from "@agl/trainer-gpu";
import { solve } from "./agent.js";
import type { Problem } from "./dataset.js";

/**
 * Run the agent against a policy directly (no store, no proxy): for quick checks outside training,
 * e.g. whether the warm start made tool use common enough for RL to amplify it. `serve` picks where it
 * generates: the in-process PolicyServer (default) or an external engine (`externalEngine({...})`).
 */

export interface EvalResult {
  accuracy: number;
  /** Share of problems where the model called the calculator at least once. */
  toolUse: number;
  /** Accuracy among the problems where it used the tool. */
  toolSuccess: number;
  n: number;
}

export async function evaluatePolicy(
  policy: PolicyBundle,
  problems: readonly Problem[],
  options: { temperature: number; seed: number; serve?: ServeFn },
): Promise<EvalResult> {
  const server = await (options.serve ?? servePolicy)(policy, { modelName: "policy" });
  try {
    const resource = llm({
      endpoint: server.url,
      model: server.servedModel?.() ?? "policy",
      ...(server.apiKey ? { api_key: server.apiKey } : {}),
      sampling_parameters: { temperature: options.temperature, max_tokens: 64 },
    });
    const results = await Promise.all(
      problems.map((p, i) =>
        solve(p, { llm: resource, rollout: { metadata: { seed: options.seed * 100_003 + i } } }),
      ),
    );
    const n = results.length;
    const withTool = results.filter((r) => r.toolCalls > 0);
    return {
      accuracy: results.filter((r) => r.correct).length / n,
      toolUse: withTool.length / n,
      toolSuccess: withTool.length ? withTool.filter((r) => r.correct).length / withTool.length : 0,
      n,
    };
  } finally {
    await server.close();
  }
}
