import { join } from "node:path";
import { InvalidArgumentError, parseOrThrow } from "@agl/core";
import { z } from "zod";
import type { CausalLM } from "../model/causal-lm.js";
import { AdapterView } from "../pretrained/adapter-view.js";
import { BaseModelView } from "../pretrained/base-view.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { readOptimizerState, writeOptimizerState } from "./checkpoint.js";
import type { CollectedRollout } from "./collect.js";
import type { PPOConfig } from "./config.js";
import { AdamW } from "./optim.js";
import { policyBatch } from "./policy-rewards.js";
import type { SeededRandom } from "./rng.js";
import { ppoUpdate } from "./step.js";

export { finalReward, type PolicyBatch, policyBatch, type RewardCredit } from "./policy-rewards.js";

/**
 * Several trainable policies in one PPO/GRPO run: one LoRA adapter per agent role over one frozen base
 * (`addLoraAdapter(model, "planner")`, ...). Each policy is served under its own model name, published to
 * agents as its own LLM resource (`planner_llm`), trained only on its own calls with its own optimizer
 * state, and checkpointed and exported as its own PEFT folder. A role may also be left untrained.
 */

export const PolicySpecSchema = z.strictObject({
  /** Train this policy (default true); false serves it as it is (a frozen role). */
  train: z.boolean().default(true),
  /**
   * The model's LoRA adapter this policy runs with (default: the policy's name); `null` = the frozen
   * base (an untrained role that needs no adapter).
   */
  adapter: z.string().min(1).nullable().optional(),
  /** The LLM resource agents read (default `<name>_llm`). */
  resourceName: z.string().min(1).optional(),
  /** Reward credit (see `RewardCredit`): "final" (default) or "own". */
  reward: z.enum(["final", "own"]).default("final"),
});
export type PolicySpec = z.input<typeof PolicySpecSchema>;
export type PolicySpecs = Readonly<Record<string, PolicySpec>>;

interface Entry {
  name: string;
  spec: z.output<typeof PolicySpecSchema>;
  adapter: string | null;
  /** The adapter as a model of its own (null: the base). */
  view: AdapterView | null;
  /** Null for a policy that is not trained. */
  optimizer: AdamW | null;
}

export class PolicySet {
  readonly entries: Entry[];
  /** The shared KL reference: the base with every adapter off. */
  readonly reference: BaseModelView;

  constructor(
    readonly model: CausalLM,
    specs: PolicySpecs,
    config: PPOConfig,
  ) {
    if (!(model instanceof PretrainedModel))
      throw new InvalidArgumentError(
        "policies",
        "needs a loaded checkpoint with one LoRA adapter per policy",
      );
    if (config.algorithm.adv_estimator === "gae")
      throw new InvalidArgumentError("policies", "train several policies with grpo or rloo (no value head)");
    const names = Object.keys(specs);
    if (names.length === 0) throw new InvalidArgumentError("policies", "declare at least one policy");
    const optim = config.actor_rollout_ref.actor.optim;
    this.reference = new BaseModelView(model);
    this.entries = names.map((name) => {
      const spec = parseOrThrow(PolicySpecSchema, specs[name], `policies.${name}`);
      const adapter = spec.adapter === undefined ? name : spec.adapter;
      if (adapter !== null && !model.adapters.has(adapter))
        throw new InvalidArgumentError(
          `policies.${name}`,
          `the model has no LoRA adapter "${adapter}" (addLoraAdapter(model, "${adapter}") first; it has: ${model.adapterNames.join(", ") || "none"})`,
        );
      if (spec.train && adapter === null)
        throw new InvalidArgumentError(`policies.${name}`, "a trained policy needs an adapter");
      const view = adapter === null ? null : new AdapterView(model, adapter);
      const optimizer =
        spec.train && view
          ? new AdamW(view.trainableVariables, {
              betas: optim.betas,
              eps: optim.eps,
              weightDecay: optim.weight_decay,
            })
          : null;
      return { name, spec, adapter, view, optimizer };
    });
    const trained = this.entries.filter((e) => e.optimizer).map((e) => e.adapter);
    if (new Set(trained).size !== trained.length)
      throw new InvalidArgumentError("policies", "two trained policies share one adapter");
  }

  /**
   * The proxy's routes (`LLMProxyOptions.policies`): each policy's name → the served name of its adapter
   * (`served`: adapter → name, an external engine's current names; default the adapter's own name, as
   * `PolicyServer` serves it), the base's name for an adapter-less role.
   */
  proxyRoutes(
    baseName: string,
    served?: Record<string, string>,
  ): Record<string, { policy: string; model: string }> {
    return Object.fromEntries(
      this.entries.map((e) => [
        e.name,
        { policy: e.name, model: e.adapter === null ? baseName : (served?.[e.adapter] ?? e.adapter) },
      ]),
    );
  }

  /** Resource name → the policy (model name) agents ask for through it. */
  resourceNames(): Record<string, string> {
    return Object.fromEntries(this.entries.map((e) => [e.spec.resourceName ?? `${e.name}_llm`, e.name]));
  }

  /**
   * One PPO/GRPO update per trained policy on its own calls (see `policyBatch`), each with its own
   * optimizer; metrics under `policy/<name>/…`, token and row counts summed at the top level.
   */
  async update(
    rollouts: readonly CollectedRollout[],
    config: PPOConfig,
    padId: number,
    rng: SeededRandom,
    totalSteps: number,
    finalOverride?: ReadonlyMap<string, number>,
  ): Promise<Record<string, number>> {
    const metrics: Record<string, number> = {};
    const useRef = config.actor_rollout_ref.actor.use_kl_loss || config.algorithm.use_kl_in_reward;
    for (const e of this.entries) {
      if (!e.optimizer || !e.view) continue;
      const batch = policyBatch(
        rollouts,
        e.name,
        e.spec.reward,
        config.agentlightning.failed_rollouts,
        finalOverride,
      );
      metrics[`policy/${e.name}/n_rollouts`] = batch.rollouts.length;
      if (batch.rollouts.length === 0) continue;
      const m = await ppoUpdate(
        batch.rollouts,
        config,
        {
          policy: e.view,
          reference: useRef ? this.reference : null,
          optimizer: e.optimizer,
          valueHead: null,
          padId,
        },
        rng,
        totalSteps,
        batch.rewards,
      );
      for (const [k, v] of Object.entries(m)) {
        metrics[`policy/${e.name}/${k}`] = v;
        if (k.startsWith("training/n_") || k === "agent_mode/n_sample_to_train")
          metrics[k] = (metrics[k] ?? 0) + v;
      }
    }
    return metrics;
  }

  /** Each trained policy's optimizer state next to the checkpoint's adapters (`policy_optim/<name>`). */
  async save(checkpointDir: string): Promise<void> {
    for (const e of this.entries)
      if (e.optimizer)
        await writeOptimizerState(join(checkpointDir, "policy_optim"), e.name, e.optimizer.getState());
  }

  /** Restore what `save` wrote (the adapters themselves come back with the checkpoint's actor). */
  async restore(checkpointDir: string): Promise<void> {
    for (const e of this.entries)
      if (e.optimizer)
        e.optimizer.setState(await readOptimizerState(join(checkpointDir, "policy_optim"), e.name));
  }

  dispose(): void {
    for (const e of this.entries) e.optimizer?.dispose();
  }
}
