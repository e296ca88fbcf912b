import { InvalidArgumentError } from "../errors.js";
import type { Logger } from "../logger.js";
import {
  isLLM,
  type LLM,
  type NamedResources,
  type PromptTemplate,
  type ProxyLLM,
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
    resolved[name] = isLLM(r) ? withEnvApiKey(r, name) : r;
    if (isLLM(r)) {
      llmNames.push(name);
      llm ??= resolved[name] as LLM;
    } else if (r.resource_type === "prompt_template") {
      promptTemplate ??= r;
    }
  }
  if (llmNames.length === 0 && logger && !warnedNoLLM.has(logger)) {
    warnedNoLLM.add(logger);
    logger.warn(
      `no LLM resource among the published resources (${Object.keys(resources).join(", ") || "none"}): the agent's context.llm is undefined; publish one, e.g. new Trainer({ initialResources: { main_llm: llm({ endpoint, model }) } })`,
    );
  }
  if (llmNames.length > 1) {
    logger?.warn(
      `several LLM resources (${llmNames.join(", ")}); the agent gets the first, "${llmNames[0]}"`,
    );
  }
  return { llm, promptTemplate, rollout: attempted, resources: resolved, signal };
}

/** Loggers already told that no LLM resource exists (once per runner's logger, not per rollout). */
const warnedNoLLM = new WeakSet<Logger>();

/**
 * An LLM whose key is referenced by name (`api_key_env`) gets the key from this process's environment:
 * it is read here, on the worker, so it never travels through the store. A missing variable fails the
 * attempt with the variable's name (never a value).
 */
function withEnvApiKey<R extends LLM | ProxyLLM>(resource: R, name: string): R {
  if (!resource.api_key_env || resource.api_key) return resource;
  const key = process.env[resource.api_key_env];
  if (key === undefined || key === "") {
    throw new InvalidArgumentError(
      `resources.${name}.api_key_env`,
      `environment variable ${resource.api_key_env} is not set on this worker (resource "${name}" reads its API key from it)`,
    );
  }
  return { ...resource, api_key: key };
}
