import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { LLM, NamedResources, PromptTemplate } from "../types/resources.js";
import type { AttemptedRollout } from "../types/rollout.js";
import type { SpanCoreFields, SpanInput } from "../types/span.js";

/** What an agent receives next to its task. */
export interface RolloutContext {
  /** The first LLM resource; a ProxyLLM already resolved to this attempt's URL. */
  llm: LLM | undefined;
  /** The first prompt template resource. */
  promptTemplate: PromptTemplate | undefined;
  /** The rollout being run, with its current attempt. */
  rollout: AttemptedRollout;
  /** Every resource of the rollout's resources version (ProxyLLMs resolved to plain LLMs). */
  resources: NamedResources;
  /** Aborted when the runner stops and the grace period is over: stop work and return. */
  signal: AbortSignal;
}

/**
 * What an agent may return: a number (or boolean) becomes a reward span; nothing means "the spans traced
 * while it ran"; a list of spans (stored Spans, SpanCoreFields from emitters, or OTel ReadableSpans) is
 * stored in addition to the traced spans.
 */
export type RolloutResult =
  | number
  | boolean
  | undefined
  | null
  // biome-ignore lint/suspicious/noConfusingVoidType: `void` lets `async () => {}` agents type-check.
  | void
  | ReadonlyArray<SpanInput | SpanCoreFields | ReadableSpan>;

export type RolloutFunction<T = any> = (
  task: T,
  context: RolloutContext,
) => RolloutResult | Promise<RolloutResult>;

/** Anything the Runner and Trainer accept as an agent. */
export type AgentLike<T = any> = LitAgentLike<T> | RolloutFunction<T> | object;

export interface LitAgentLike<T = any> {
  trainingRollout(task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult>;
  validationRollout(task: T, context: RolloutContext): RolloutResult | Promise<RolloutResult>;
}
