import type { ServeFn } from "../ppo/serving.js";
import type { WeightSync } from "./weight-sync.js";

export interface ExternalEngineOptions {
  /** OpenAI-compatible base URL of the engine (vLLM, SGLang), e.g. "http://vllm:8000/v1". */
  url: string;
  /** Sent to the engine as a bearer token. */
  apiKey?: string;
  /** How each update reaches the engine. */
  weightSync: WeightSync;
}

/**
 * Use an external OpenAI-compatible inference engine as PPO's rollout engine instead of the in-process
 * PolicyServer (`new PPO({ serve: externalEngine({...}) })`): the trainer's LLM proxy forwards every
 * call to it (asking for token ids and log-probs, which vLLM returns), the trainer computes gradients
 * on its own copy of the weights, and after each update `weightSync` puts the new weights on the
 * engine while rollouts are paused and drained; the proxy then asks for the model name it returned.
 * The engine's log-probs are the rollout log-probs; with `actor.tis_imp_ratio_cap` set, truncated
 * importance sampling corrects the engine/trainer mismatch.
 */
export function externalEngine(options: ExternalEngineOptions): ServeFn {
  return async (policy) => {
    let model = await options.weightSync.start(policy);
    let version = 0;
    return {
      url: options.url,
      ...(options.apiKey ? { apiKey: options.apiKey } : {}),
      servedModel: () => model,
      ...(options.weightSync.servedModels ? { servedModels: () => options.weightSync.servedModels!() } : {}),
      async swapWeights(apply) {
        await apply();
        version += 1;
        model = await options.weightSync.sync(policy, version);
        return version;
      },
      // Asynchronous training: the engine has its own copy of the weights, so publishing is a sync with
      // no pause; calls running on the previous version finish on it.
      async publish() {
        version += 1;
        model = await options.weightSync.sync(policy, version, { keepPrevious: true });
        return version;
      },
      close: () => options.weightSync.close(),
    };
  };
}
