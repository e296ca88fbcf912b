import type { GenerationEngine } from "../generate/engine.js";
import type { CausalLM } from "../model/causal-lm.js";
import { PolicyServer } from "../server/policy-server.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";

/**
 * The policy being trained: model, tokenizer and chat template — what `loadCheckpoint` returns for a
 * `PolicyModel`, or `loadPretrained` + `HfTokenizer`/`HfChatTemplate` (see `loadPretrainedPolicy`).
 */
export interface PolicyBundle {
  model: CausalLM;
  tokenizer: TextTokenizer;
  template: ChatEncoder;
}

/** A running OpenAI-compatible server sampling from `PolicyBundle.model`. */
export interface ServingHandle {
  /** Base URL of the OpenAI API (ending in `/v1`). */
  url: string;
  /** Bearer token the proxy sends to the server. */
  apiKey?: string;
  /**
   * The model name to ask the server for, when it is not the agents' model name (an external engine
   * serving each policy version under its own LoRA adapter name). Read again after every swap.
   */
  servedModel?: () => string;
  /**
   * Multi-policy runs: each policy (adapter) name → the model name to ask the server for (read again
   * after every swap). Absent: each policy is served under its own name.
   */
  servedModels?: () => Record<string, string>;
  /** Drain running generations, run `apply` (which changes the model's weights in place), bump and
   * return the served model version, resume. */
  swapWeights(apply: () => void | Promise<void>): Promise<string | number>;
  close(): Promise<void>;
}

export type ServeFn = (policy: PolicyBundle, options: { modelName: string }) => Promise<ServingHandle>;

/** Start an in-process `PolicyServer` for `policy` on a loopback port (generation by `generator`, default a
 * `Generator` in this thread) and wrap it as a ServingHandle. */
export async function startPolicyServer(
  policy: PolicyBundle,
  modelName: string,
  generator?: GenerationEngine,
): Promise<ServingHandle> {
  const server = new PolicyServer({
    model: policy.model,
    tokenizer: policy.tokenizer,
    template: policy.template,
    modelName,
    generator,
  });
  await server.start();
  return {
    url: server.baseUrl,
    swapWeights: (apply) => server.swapWeights(async () => apply()),
    close: () => server.stop(),
  };
}

/** The default: the in-process `PolicyServer` (dynamic batching, vLLM token ids) on a loopback port. */
export const servePolicy: ServeFn = (policy, { modelName }) => startPolicyServer(policy, modelName);
