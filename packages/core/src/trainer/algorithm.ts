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

/**
 * A training (or evaluation) procedure: it publishes resources, enqueues rollouts, waits for them and
 * learns from their spans. Runners execute the rollouts concurrently in the meantime.
 */
export interface Algorithm<T = unknown, R = unknown> {
  readonly name?: string;
  /** Cheap enough for `trainer.dev()` (a smoke test of the agent), like the reference's FastAlgorithm. */
  readonly fast?: boolean;
  run(context: AlgorithmContext<T>): Promise<R>;
}

export function isAlgorithm(value: unknown): value is Algorithm {
  return typeof value === "object" && value !== null && typeof (value as Algorithm).run === "function";
}
