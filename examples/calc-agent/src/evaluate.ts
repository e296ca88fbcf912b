import { llm } from "@agl/core";
import { type PolicyBundle, PolicyServer } from "@agl/trainer-gpu";
import { solve } from "./agent.js";
import type { Problem } from "./dataset.js";

/**
 * Run the agent against a policy directly (no store, no proxy): for quick checks outside training,
 * e.g. whether the warm start made tool use common enough for RL to amplify it.
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
  options: { temperature: number; seed: number },
): Promise<EvalResult> {
  const server = new PolicyServer({
    model: policy.model,
    tokenizer: policy.tokenizer,
    template: policy.template,
    modelName: "policy",
  });
  await server.start();
  try {
    const resource = llm({
      endpoint: server.baseUrl,
      model: "policy",
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
    await server.stop();
  }
}
