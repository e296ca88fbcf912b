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
import { type PolicyBatch, policyBatch } from "./policy-rewards.js";
import type { SeededRandom } from "./rng.js";
import { ppoUpdate } from "./step.js";

export { finalReward, type PolicyBatch, policyBatch, type RewardCredit } from "./policy-rewards.js";

/**
 * Several trainable policies in one PPO/GRPO run: one LoRA adapter per agent role over one frozen base
 * (`addLoraAdapter(model, "planner")`, ...). Each policy is served under its own model name, published to
 * agents as its own LLM resource (`planner_llm`), trained only on its own calls with its own optimizer
 * state, and checkpointed and exported as its own PEFT folder. A role may also be left untrained.
 *
 * Several trained policies may also name ONE adapter (`{ planner: { adapter: "shared" }, checker: {
 * adapter: "shared" } }`): the roles keep their own names, resources, spans and reward credit, but train one
 * adapter with one optimizer, in one update on all their calls — the "one shared adapter" baseline to an
 * adapter per role, with the same advantages (each role's calls are still grouped among themselves).
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
  /** Null for a policy that is not trained; trained policies sharing an adapter share this object. */
  optimizer: AdamW | null;
}

/** The trained policies of one adapter: trained together in one update with one optimizer. */
interface AdapterGroup {
  /** Metric and optimizer-file key: the policy's name, or the names joined by "+" when shared. */
  key: string;
  view: AdapterView;
  optimizer: AdamW;
  members: Entry[];
}

/**
 * One update's batch for several policies on one adapter: each policy's share (`policyBatch`) as rollouts
 * of their own (`<id>#<policy>`, group `<uid>#<policy>`), so a rollout's calls of each role carry that
 * role's reward and are normalised among that role's calls of the sample, as with an adapter per role.
 */
export function sharedAdapterBatch(batches: ReadonlyArray<readonly [string, PolicyBatch]>): PolicyBatch {
  const out: PolicyBatch = { rollouts: [], rewards: new Map() };
  for (const [policy, batch] of batches)
    for (const r of batch.rollouts) {
      const rolloutId = `${r.rolloutId}#${policy}`;
      out.rollouts.push({ ...r, rolloutId, uid: `${r.uid}#${policy}` });
      out.rewards.set(rolloutId, batch.rewards.get(r.rolloutId)!);
    }
  return out;
}

export class PolicySet {
  readonly entries: Entry[];
  /** The shared KL reference: the base with every adapter off. */
  readonly reference: BaseModelView;
  /** One per trained adapter, in the order of their first policy. */
  readonly groups: AdapterGroup[];

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
    const groups = new Map<string, AdapterGroup>();
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
      const entry: Entry = { name, spec, adapter, view, optimizer: null };
      if (spec.train && view && adapter !== null) {
        let group = groups.get(adapter);
        if (!group) {
          const optimizer = new AdamW(view.trainableVariables, {
            betas: optim.betas,
            eps: optim.eps,
            weightDecay: optim.weight_decay,
          });
          group = { key: name, view, optimizer, members: [] };
          groups.set(adapter, group);
        }
        group.members.push(entry);
        entry.optimizer = group.optimizer;
      }
      return entry;
    });
    this.groups = [...groups.values()];
    for (const g of this.groups) g.key = g.members.map((m) => m.name).join("+");
    const frozen = this.entries.filter((e) => !e.spec.train && e.adapter !== null && groups.has(e.adapter));
    if (frozen.length > 0)
      throw new InvalidArgumentError(
        `policies.${frozen[0]!.name}`,
        `adapter "${frozen[0]!.adapter}" is trained by another policy: an untrained role cannot use it`,
      );
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
    for (const g of this.groups) {
      const batches = g.members.map((e) => {
        const b = policyBatch(
          rollouts,
          e.name,
          e.spec.reward,
          config.agentlightning.failed_rollouts,
          finalOverride,
        );
        metrics[`policy/${e.name}/n_rollouts`] = b.rollouts.length;
        if (b.rollouts.length > 0) {
          const rewards = [...b.rewards.values()];
          metrics[`policy/${e.name}/reward_mean`] = rewards.reduce((a, x) => a + x, 0) / rewards.length;
        }
        return [e.name, b] as const;
      });
      const batch = batches.length === 1 ? batches[0]![1] : sharedAdapterBatch(batches);
      if (batch.rollouts.length === 0) continue;
      const m = await ppoUpdate(
        batch.rollouts,
        config,
        {
          policy: g.view,
          reference: useRef ? this.reference : null,
          optimizer: g.optimizer,
          valueHead: null,
          padId,
        },
        rng,
        totalSteps,
        batch.rewards,
      );
      for (const [k, v] of Object.entries(m)) {
        metrics[`policy/${g.key}/${k}`] = v;
        if (k.startsWith("training/n_") || k === "agent_mode/n_sample_to_train")
          metrics[k] = (metrics[k] ?? 0) + v;
      }
    }
    return metrics;
  }

  /**
   * Each trained adapter's optimizer state next to the checkpoint's adapters (`policy_optim/<name>`, or
   * `policy_optim/<a>+<b>` for an adapter policies a and b share).
   */
  async save(checkpointDir: string): Promise<void> {
    for (const g of this.groups)
      await writeOptimizerState(join(checkpointDir, "policy_optim"), g.key, g.optimizer.getState());
  }

  /** Restore what `save` wrote (the adapters themselves come back with the checkpoint's actor). */
  async restore(checkpointDir: string): Promise<void> {
    for (const g of this.groups)
      g.optimizer.setState(await readOptimizerState(join(checkpointDir, "policy_optim"), g.key));
  }

  dispose(): void {
    for (const g of this.groups) g.optimizer.dispose();
  }
}
