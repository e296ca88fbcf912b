import type { PolicyBundle } from "../ppo/serving.js";

/**
 * How the weights the trainer updates reach an external inference engine (vLLM, SGLang, ...) that
 * generates the rollouts. The trainer keeps its own copy of the weights and computes the gradients;
 * after each update the engine must serve exactly those weights before the next rollout is sampled.
 * Two implementations: `VllmLoraSync` (LoRA adapters through vLLM's runtime adapter API) and
 * `ReloadHookSync` (a full checkpoint written to disk, then a hook that makes the engine reload it).
 */
export interface WeightSync {
  /** What the logs call it, e.g. "vllm-lora". */
  readonly kind: string;
  /**
   * Before the first rollout: make the engine serve the initial policy. Resolves with the model name
   * to ask the engine for (what the proxy rewrites every call's `model` to).
   */
  start(policy: PolicyBundle): Promise<string>;
  /**
   * After an update changed the policy's weights in place (rollouts are paused and drained, or, with
   * `keepPrevious`, still running on the previous version): make the engine serve them as policy version
   * `version`. Resolves with the model name to use from now on.
   */
  sync(policy: PolicyBundle, version: number, options?: SyncOptions): Promise<string>;
  /**
   * Multi-policy runs: each policy (LoRA adapter) name → the engine-side model name serving its current
   * version, after `start`/`sync`.
   */
  servedModels?(): Record<string, string>;
  /** Release what `start`/`sync` left on the engine or on disk. */
  close(): Promise<void>;
}

export interface SyncOptions {
  /**
   * Asynchronous training publishes while calls are running: calls that started on the previous
   * version finish on it, so the sync must leave it on the engine (until the next sync) instead of
   * retiring it at once.
   */
  keepPrevious?: boolean;
}

const MARKER = Symbol.for("agl.trainer-gpu.WeightSyncError");

/** The engine refused or failed a weight update (its HTTP status and answer, when there was one). */
export class WeightSyncError extends Error {
  readonly [MARKER] = true;
  override readonly name = "WeightSyncError";

  constructor(
    message: string,
    readonly status: number | null = null,
    readonly body: string | null = null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }

  static isInstance(value: unknown): value is WeightSyncError {
    return typeof value === "object" && value !== null && (value as Record<symbol, unknown>)[MARKER] === true;
  }
}
