import type { GenerationEngine } from "../generate/engine.js";
import type { CausalLM } from "../model/causal-lm.js";
import { PolicyServer } from "../server/policy-server.js";
import { VersionedEngine } from "../server/version-publication.js";
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
  /**
   * Asynchronous training (`max_staleness` > 0): serve the policy's current weights (already updated in
   * place by the trainer) as a new version, without pausing. Requests in flight finish on the version
   * they started on; new ones get the new version. Returns the new version. Present when the server was
   * started with `publication: "snapshot"` and can do it.
   */
  publish?(): Promise<string | number>;
  /**
   * What `publish` does to generations in flight: "finish" them on their version (the default when
   * absent) or "resume" them on the new one (partial rollouts). Reports what the engine really does.
   */
  inFlight?: "finish" | "resume";
  close(): Promise<void>;
}

export interface ServeOptions {
  modelName: string;
  /**
   * "swap" (default): the server may generate from `policy.model` itself; updates go through
   * `swapWeights`, which drains running generations first. "snapshot": the trainer updates
   * `policy.model` while generation continues, so the server must generate from its own copy of the
   * weights and implement `publish`.
   */
  publication?: "swap" | "snapshot";
  /**
   * With "snapshot": what a publication does to generations in flight (`VersionedEngine`'s `inFlight`).
   * "resume" is `rollout.partial_rollouts`; an engine that cannot do it leaves `ServingHandle.inFlight`
   * unset or "finish", and the trainer refuses to start.
   */
  inFlight?: "finish" | "resume";
}

export type ServeFn = (policy: PolicyBundle, options: ServeOptions) => Promise<ServingHandle>;

/** Start an in-process `PolicyServer` for `policy` on a loopback port (generation by `generator`, default a
 * `Generator` in this thread, or a `VersionedEngine` over snapshots of the model for `publication:
 * "snapshot"`) and wrap it as a ServingHandle. */
export async function startPolicyServer(
  policy: PolicyBundle,
  modelName: string,
  generator?: GenerationEngine,
  publication: ServeOptions["publication"] = "swap",
  inFlight: ServeOptions["inFlight"] = "finish",
): Promise<ServingHandle> {
  const versioned =
    !generator && publication === "snapshot"
      ? new VersionedEngine(policy.model, policy.tokenizer, { inFlight })
      : null;
  const server = new PolicyServer({
    model: policy.model,
    tokenizer: policy.tokenizer,
    template: policy.template,
    modelName,
    generator: generator ?? versioned ?? undefined,
  });
  await server.start();
  return {
    url: server.baseUrl,
    swapWeights: (apply) => server.swapWeights(async () => apply()),
    ...(versioned ? { publish: async () => versioned.publish(), inFlight } : {}),
    close: async () => {
      await server.stop();
      versioned?.dispose();
    },
  };
}

/** The default: the in-process `PolicyServer` (dynamic batching, vLLM token ids) on a loopback port. */
export const servePolicy: ServeFn = (policy, { modelName, publication, inFlight }) =>
  startPolicyServer(policy, modelName, undefined, publication, inFlight);
