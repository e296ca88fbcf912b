import type { Triplet } from "@agl/core";
import { type Adapter, type DiagnosingAdapter, defineAdapter, runAdapter } from "./adapter.js";

/**
 * Multi-policy training (one LoRA adapter per agent role): which trainable policy each LLM call belongs to.
 * A call routed by the proxy already carries its policy (`metadata.policy`, from `agl.proxy.policy`);
 * otherwise the first declared policy whose rule matches claims it: `model` (the model name the agent
 * asked for) or `agentMatch` (the name of the agent span the call ran in, `metadata.agent_name`, which
 * `TraceToTriplets` sets). A call no policy claims keeps `metadata.policy = null` and trains nothing.
 */
export interface PolicyRule {
  /** Model names (the agent's `model`) of this policy's calls. */
  model?: string | readonly string[];
  /** Agent span name pattern (a string is a regular expression, as in `TraceToTriplets`'s `agentMatch`). */
  agentMatch?: RegExp | string;
}

export type PolicyRules = Readonly<Record<string, PolicyRule>>;

/** The policy of one triplet under `rules` (see `withPolicies`), or null. */
export function policyOf(triplet: Triplet, rules: PolicyRules): string | null {
  const meta = (triplet.metadata ?? {}) as Record<string, unknown>;
  if (typeof meta.policy === "string" && meta.policy.length > 0) return meta.policy;
  const request = meta.request as { model?: unknown } | undefined;
  const models = [meta.client_model, request?.model, meta.model].filter(
    (m): m is string => typeof m === "string",
  );
  const agent = typeof meta.agent_name === "string" ? meta.agent_name : null;
  for (const [name, rule] of Object.entries(rules)) {
    if (rule.model !== undefined) {
      const wanted = typeof rule.model === "string" ? [rule.model] : rule.model;
      if (models.some((m) => wanted.includes(m))) return name;
    }
    if (rule.agentMatch !== undefined && agent !== null) {
      const re = typeof rule.agentMatch === "string" ? new RegExp(rule.agentMatch) : rule.agentMatch;
      if (re.test(agent)) return name;
    }
  }
  return null;
}

/**
 * Wrap a triplet adapter so every triplet names its policy in `metadata.policy` (string, or null when no
 * rule claims it; such calls are reported as `call_without_policy`).
 */
export function withPolicies<From>(
  base: Adapter<From, Triplet[]>,
  rules: PolicyRules,
): DiagnosingAdapter<From, Triplet[]> {
  return defineAdapter("withPolicies", (input: From, ctx) => {
    const { output, diagnostics } = runAdapter(base, input);
    ctx.diagnostics.merge(diagnostics);
    return output.map((t) => {
      const policy = policyOf(t, rules);
      if (policy === null)
        ctx.diagnostics.add(
          "call_without_policy",
          "info",
          `call ${String(t.metadata?.response_id ?? "")} matches no declared policy (${Object.keys(rules).join(", ")})`,
        );
      return { ...t, metadata: { ...t.metadata, policy } };
    });
  });
}
