import type { Triplet } from "@agl/core";
import type { CollectedRollout } from "./collect.js";
import type { PPOConfig } from "./config.js";
import { trainingRewards } from "./step.js";

/**
 * Credit assignment of a multi-policy run: which rollouts train a policy and with which reward. A policy
 * trains on a rollout only through its own calls (`metadata.policy`); a rollout where it made no call is
 * left out of its batch, so GRPO's group of a sample is that policy's rollouts of the sample.
 *
 * - "final": every policy gets the rollout's final reward: the last reward not scoped to one policy
 *   (`emitReward(x)`), else the last reward span, else 0.
 * - "own": the last reward emitted for this policy (`emitReward(x, { policy })`, carried by the call it
 *   was matched to as `metadata.reward_policy`), falling back to the final reward when it got none.
 */
export type RewardCredit = "final" | "own";

const policyOfTriplet = (t: Triplet): unknown => (t.metadata as Record<string, unknown> | undefined)?.policy;
const rewardPolicyOf = (t: Triplet): unknown =>
  (t.metadata as Record<string, unknown> | undefined)?.reward_policy;

/** The last finite reward among `triplets` passing `keep`, or null. */
function lastReward(triplets: readonly Triplet[], keep: (t: Triplet) => boolean): number | null {
  for (let i = triplets.length - 1; i >= 0; i--) {
    const t = triplets[i]!;
    if (t.reward != null && Number.isFinite(t.reward) && keep(t)) return t.reward;
  }
  return null;
}

/** The final reward of a rollout in a multi-policy run (see `RewardCredit`). */
export function finalReward(rollout: CollectedRollout): number {
  return lastReward(rollout.triplets, (t) => rewardPolicyOf(t) == null) ?? rollout.reward ?? 0;
}

export interface PolicyBatch {
  /** The rollouts the policy called in, each with only the policy's own triplets. */
  rollouts: CollectedRollout[];
  /** The reward each of them is trained with, by rollout id. */
  rewards: Map<string, number>;
}

/**
 * A policy's share of a step: its rollouts (own calls only) and their rewards. `finalOverride`: rewards
 * replacing the final reward (`PPOOptions.mapRewards`), by rollout id.
 */
export function policyBatch(
  rollouts: readonly CollectedRollout[],
  policy: string,
  credit: RewardCredit,
  failed: PPOConfig["agentlightning"]["failed_rollouts"],
  finalOverride?: ReadonlyMap<string, number>,
): PolicyBatch {
  // Which rollouts enter a batch at all (failed ones: zero reward or dropped) follows the single-policy rule.
  const usable = trainingRewards(rollouts, failed);
  const out: PolicyBatch = { rollouts: [], rewards: new Map() };
  for (const r of rollouts) {
    if (!usable.has(r.rolloutId)) continue;
    const own = r.triplets.filter((t) => policyOfTriplet(t) === policy);
    if (own.length === 0) continue;
    const final = r.status === "succeeded" ? finalReward(r) : (usable.get(r.rolloutId) as number);
    const base = finalOverride?.get(r.rolloutId) ?? final;
    const reward =
      credit === "own" && r.status === "succeeded"
        ? (lastReward(own, (t) => rewardPolicyOf(t) === policy) ?? base)
        : base;
    out.rollouts.push({ ...r, triplets: own });
    out.rewards.set(r.rolloutId, reward);
  }
  return out;
}
