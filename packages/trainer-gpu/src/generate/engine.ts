import type { CausalLM } from "../model/causal-lm.js";
import type { GenerateRequest, GenerateResult } from "./request.js";

/**
 * What the PolicyServer's routes and weight swaps need from a generation engine. `Generator` (dynamic
 * batching in this thread) implements it, and so does `PooledGenerator` (the same Generator running on
 * worker threads, one replica of the policy each).
 */
export interface GenerationEngine {
  /** The served model (the main thread's copy for a pooled engine). */
  readonly policy: CausalLM;
  /** Increments every time weights are swapped. */
  readonly version: number;
  readonly activeCount: number;
  readonly queuedCount: number;
  readonly isPaused: boolean;
  /** Generate a group of sequences admitted together on one weights version (the `n` choices of a request). */
  generateMany(requests: readonly GenerateRequest[]): Promise<GenerateResult[]>;
  /** Stop admitting and resolve once running sequences finished; queued requests wait for `resume`. */
  pause(): Promise<void>;
  /** Resume admission; `weightsChanged` after updating the served model in place bumps `version`. */
  resume(options?: { weightsChanged?: boolean }): void;
  /** Drain, apply new weights (a model to copy from, or a callback), bump `version`, resume. */
  swapWeights(apply?: CausalLM | ((model: CausalLM) => void | Promise<void>)): Promise<number>;
}
