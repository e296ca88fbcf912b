import type { Adapter } from "../adapter.js";
import type { Logger } from "../logger.js";
import type { LightningStore } from "../store/store.js";
import type { NamedResources } from "../types/resources.js";

/** What an algorithm gets from the Trainer. */
export interface AlgorithmContext<T = unknown> {
  store: LightningStore;
  adapter: Adapter<any, any> | undefined;
  trainDataset: readonly T[];
  valDataset: readonly T[] | undefined;
  /** Resources to publish before the first rollout (the Trainer's `initialResources`). */
  initialResources: NamedResources | undefined;
  /** Aborted when the Trainer is stopped; return promptly. */
  signal: AbortSignal;
  logger: Logger;
}

/** What the Trainer's runners need to call services an algorithm owns. */
export interface RunnerCredentials {
  /**
   * The token secret of the algorithm's LLM proxy (`LLMProxy.tokenSecret`): runners give each agent's
   * ProxyLLM a token scoped to its attempt, so the proxy can require tokens on its LLM routes.
   */
  proxyTokenSecret?: string;
}

/**
 * A training (or evaluation) procedure: it publishes resources, enqueues rollouts, waits for them and
 * learns from their spans. Runners execute the rollouts concurrently in the meantime.
 */
export interface Algorithm<T = unknown, R = unknown> {
  readonly name?: string;
  /** Cheap enough for `trainer.dev()` (a smoke test of the agent), like the reference's FastAlgorithm. */
  readonly fast?: boolean;
  run(context: AlgorithmContext<T>): Promise<R>;
  /**
   * Called by the Trainer before it starts its runners (so before `run`): an algorithm that starts its
   * own LLM proxy in `run` must therefore fix the proxy's token secret beforehand (e.g. at construction).
   */
  runnerCredentials?(): RunnerCredentials;
}

export function isAlgorithm(value: unknown): value is Algorithm {
  if (typeof value !== "object" || value === null) return false;
  const { run, runnerCredentials } = value as Algorithm;
  return (
    typeof run === "function" && (runnerCredentials === undefined || typeof runnerCredentials === "function")
  );
}
