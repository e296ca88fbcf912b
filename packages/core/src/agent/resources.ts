import type { Logger } from "../logger.js";
import {
  isLLM,
  type LLM,
  type NamedResources,
  type PromptTemplate,
  resolveForAttempt,
} from "../types/resources.js";
import type { AttemptedRollout } from "../types/rollout.js";
import type { RolloutContext } from "./types.js";

/**
 * Build what the agent sees for one attempt: every ProxyLLM resolved to this attempt's own URL (so the
 * proxy can attribute calls), and the first LLM and first prompt template picked out.
 */
export function buildRolloutContext(
  attempted: AttemptedRollout,
  resources: NamedResources,
  signal: AbortSignal,
  logger?: Logger,
  /** Given to every ProxyLLM as its api_key (the runner's token scoped to this attempt). */
  proxyApiKey?: string,
): RolloutContext {
  const resolved: NamedResources = {};
  let llm: LLM | undefined;
  let promptTemplate: PromptTemplate | undefined;
  const llmNames: string[] = [];
  for (const [name, resource] of Object.entries(resources)) {
    const r = resolveForAttempt(
      resource,
      attempted.rollout_id,
      attempted.attempt.attempt_id,
      proxyApiKey === undefined ? {} : { apiKey: proxyApiKey },
    );
    resolved[name] = r;
    if (isLLM(r)) {
      llmNames.push(name);
      llm ??= r as LLM;
    } else if (r.resource_type === "prompt_template") {
      promptTemplate ??= r;
    }
  }
  if (llmNames.length > 1) {
    logger?.warn(
      `several LLM resources (${llmNames.join(", ")}); the agent gets the first, "${llmNames[0]}"`,
    );
  }
  return { llm, promptTemplate, rollout: attempted, resources: resolved, signal };
}
