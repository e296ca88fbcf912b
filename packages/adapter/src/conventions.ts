import { type Attributes, getRewardValue, SPAN_NAMES, type Span } from "@agl/core";
import { flattenAttributes } from "./attributes.js";

const LEGACY_REWARD_SPAN = SPAN_NAMES.rewardV02;
const OPERATION_SPAN = SPAN_NAMES.operation;

/** Flat attributes of a span, cached: readers call this many times per span. */
const flatCache = new WeakMap<object, Attributes>();
export function attrs(span: Span): Attributes {
  const a = span.attributes ?? {};
  let flat = flatCache.get(a);
  if (!flat) {
    flat = flattenAttributes(a);
    flatCache.set(a, flat);
  }
  return flat;
}

/**
 * The agent name a span declares, checking the keys of the frameworks Agent Lightning knows
 * (OpenAI Agents, AgentOps, AutoGen, LangChain, Agent Framework, and `operation()` with type "agent").
 */
export function agentNameOf(span: Span): string | null {
  const a = attrs(span);
  const str = (k: string) => (typeof a[k] === "string" && a[k] !== "" ? (a[k] as string) : null);
  return (
    str("agent.name") ??
    (a["agentops.span.kind"] === "agent" ? str("operation.name") : null) ??
    str("recipient_agent_type") ??
    str("langchain.chain.type") ??
    str("executor.id") ??
    (a["agentlightning.operation.input.type"] === "agent"
      ? str("agentlightning.operation.input.name")
      : null) ??
    (span.name.startsWith("langchain.Chain.") ? str("lc_name") : null)
  );
}

/**
 * The reward a span carries, or null: core's reader (v0.3 `agentlightning.reward.*`, AgentOps
 * `@reward` output, annotation `reward`, v0.2 `agentlightning.reward`), here on flattened attributes.
 */
export function rewardOf(span: Span): number | null {
  const a = attrs(span);
  let cached = rewardCache.get(a);
  if (cached === undefined) {
    cached = mayCarryReward(span.name, a) ? getRewardValue({ name: span.name, attributes: a }) : null;
    rewardCache.set(a, cached);
  }
  return cached;
}

const rewardCache = new WeakMap<object, number | null>();

/** Cheap pre-check so most spans skip the full reward reader (called for every span of every rollout). */
function mayCarryReward(name: string, a: Attributes): boolean {
  if (name === SPAN_NAMES.annotation || name === LEGACY_REWARD_SPAN) return true;
  for (const key in a) {
    if (key.charCodeAt(0) !== 97) continue; // 'a': agentlightning.* / agentops.*
    if (key.startsWith("agentlightning.reward") || key.startsWith("agentops.")) return true;
  }
  return false;
}

/** A span whose subtree holds reward computation (its LLM calls are graders, not the policy). */
export function isRewardSpan(span: Span): boolean {
  if (rewardOf(span) !== null) return true;
  if (span.name === LEGACY_REWARD_SPAN) return true;
  const a = attrs(span);
  return span.name === OPERATION_SPAN && a["agentlightning.operation.name"] === "agentlightning.reward";
}

/** The last reward in list order, or null (Agent Lightning's `find_final_reward`). */
export function finalReward(spans: readonly Span[]): number | null {
  for (let i = spans.length - 1; i >= 0; i--) {
    const r = rewardOf(spans[i]!);
    if (r !== null) return r;
  }
  return null;
}
