import { InvalidArgumentError } from "@agl/core";
import type { CausalLM } from "../model/causal-lm.js";
import { policyLogprobs, runActorUpdate } from "../parallel/data-parallel.js";
import type { PolicyWorkers } from "../parallel/pool.js";
import { type FitOptions, fitMicroBatch } from "../pretrained/memory-fit.js";
import { computeLogprobs, type RowTensors, scoringTemperature } from "./actor.js";
import { computeAdvantages, zeroVarianceGroups } from "./advantages.js";
import { selectRows } from "./batch.js";
import type { CollectedRollout } from "./collect.js";
import { miniBatchRows, type PPOConfig } from "./config.js";
import { tisWeights } from "./loss.js";
import { type AdamW, learningRate } from "./optim.js";
import type { SeededRandom } from "./rng.js";
import { finalTripletReward, rowsFromRollouts } from "./triplet-rows.js";
import type { ValueHead } from "./value-head.js";

/**
 * One PPO update from a step's finished rollouts: rows, advantages, old/reference log-probs, the actor
 * (and critic) update. Returns VERL-named metrics.
 */

export interface StepModels {
  policy: CausalLM;
  reference: CausalLM | null;
  optimizer: AdamW;
  valueHead: ValueHead | null;
  padId: number;
  /** Compute the actor's micro-batch gradients on these worker threads (see `startPolicyWorkers`). */
  workers?: PolicyWorkers | null;
}

function klValue(lp: number, ref: number, type: PPOConfig["algorithm"]["kl_penalty"]): number {
  const d = lp - ref;
  if (type === "kl" || type === "k1") return d;
  if (type === "abs") return Math.abs(d);
  if (type === "mse" || type === "k2") return 0.5 * d * d;
  const kl = Math.max(-20, Math.min(20, -d));
  return Math.max(-10, Math.min(10, Math.exp(kl) - kl - 1));
}

const mean = (xs: readonly number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/**
 * The reward each rollout is trained with, absent when it is left out of the batch. A succeeded rollout:
 * the last reward a triplet carries, else its last reward span (a reward emitted after the last LLM call
 * reaches no triplet), else 0. A failed one: 0 under `failed_rollouts: "zero_reward"`.
 */
export function trainingRewards(
  rollouts: readonly CollectedRollout[],
  failed: PPOConfig["agentlightning"]["failed_rollouts"],
): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of rollouts) {
    if (r.status === "succeeded") {
      const carried = r.triplets.some((t) => t.reward != null && Number.isFinite(t.reward));
      out.set(r.rolloutId, carried ? finalTripletReward(r.triplets) : (r.reward ?? 0));
    } else if (r.status === "failed" && failed === "zero_reward") out.set(r.rolloutId, 0);
  }
  return out;
}

export type RewardMapper = (
  rewards: readonly number[],
  info: { step: number; rng: SeededRandom },
) => readonly number[];

/** Apply `PPOOptions.mapRewards` to a step's training rewards; the result is checked, then keyed by rollout. */
export function mapStepRewards(
  rollouts: readonly CollectedRollout[],
  config: PPOConfig,
  map: RewardMapper,
  info: { step: number; rng: SeededRandom },
): Map<string, number> {
  const earned = trainingRewards(rollouts, config.agentlightning.failed_rollouts);
  const ids = [...earned.keys()];
  const mapped = map(
    ids.map((id) => earned.get(id)!),
    info,
  );
  if (!Array.isArray(mapped) || mapped.length !== ids.length)
    throw new InvalidArgumentError("mapRewards", `must return ${ids.length} rewards, one per rollout`);
  const bad = mapped.findIndex((x) => typeof x !== "number" || !Number.isFinite(x));
  if (bad >= 0) throw new InvalidArgumentError(`mapRewards[${bad}]`, "must be a finite number");
  return new Map(ids.map((id, i) => [id, mapped[i]!]));
}

/**
 * The memory check of the actor's micro-batch (see `fitMicroBatch`): `ppo_micro_batch_size_per_gpu` rows
 * of `seqLength` tokens, shrunk when they would not fit (gradient accumulation gives the same update).
 * `optimizerSlots` is 0 here: AdamW creates its moments when the trainer starts.
 */
export function microBatchFitOptions(
  config: PPOConfig,
  seqLength: number,
  optimizerSlots: number,
): FitOptions {
  return {
    rows: config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu,
    seqLength,
    option: "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    fixed: false,
    lengthOption: "data.max_prompt_length + data.max_response_length",
    optimizerSlots,
  };
}

export async function ppoUpdate(
  rollouts: readonly CollectedRollout[],
  config: PPOConfig,
  models: StepModels,
  rng: SeededRandom,
  totalSteps: number,
  /** Rewards to train with instead of `trainingRewards(...)`, by rollout id (e.g. a shuffled-reward control). */
  rewardsOverride?: ReadonlyMap<string, number>,
): Promise<Record<string, number>> {
  const actor = config.actor_rollout_ref.actor;
  const algo = config.algorithm;
  const rewards = rewardsOverride ?? trainingRewards(rollouts, config.agentlightning.failed_rollouts);
  const usable = rollouts.filter((r) => rewards.has(r.rolloutId));
  const { rows: allRows, stats } = rowsFromRollouts(usable, {
    level: config.agentlightning.trace_aggregator.level,
    maxPromptLength: config.data.max_prompt_length,
    maxResponseLength: config.data.max_response_length,
  });
  // Every row of a rollout is scored with the rollout's training reward: its final reward (the last reward
  // span, also when no triplet carries it), 0 for a failed rollout, or the override.
  for (const row of allRows) row.score = rewards.get(row.rolloutId) ?? row.score;
  const groupless = algo.adv_estimator === "grpo" || algo.adv_estimator === "rloo";
  const zeroVariance = groupless ? zeroVarianceGroups(allRows) : undefined;
  const sel = selectRows(allRows, {
    miniBatchRows: miniBatchRows(config),
    skipUids: algo.skip_zero_variance_groups ? zeroVariance : undefined,
    trimFirstUids: zeroVariance,
    rng,
    shuffle: config.data.shuffle,
  });
  const rows = sel.rows;
  const metrics: Record<string, number> = {
    "training/n_rollouts_failed": rollouts.filter((r) => r.status === "failed").length,
    "training/n_rollouts_dropped": rollouts.length - usable.length,
    "training/n_triplets": stats.n_triplets,
    "training/n_triplets_without_tokens": stats.n_triplets_without_tokens,
    "training/n_triplets_prompt_too_long": stats.n_triplets_prompt_too_long,
    "training/n_triplets_dropped_remainder": sel.stats.n_triplets_dropped_remainder,
    "training/n_rows_skipped_zero_variance": sel.stats.n_rows_skipped_zero_variance,
    "training/n_trajectory_prefix_mismatch": stats.n_trajectory_prefix_mismatch,
    "agent_mode/n_trunc_sample_because_of_response": stats.n_trunc_sample_because_of_response,
    "agent_mode/n_sample_to_train": rows.length,
  };
  if (rows.length === 0) return metrics;

  const needOld =
    actor.ppo_epochs > 1 || rows.length > miniBatchRows(config) || actor.tis_imp_ratio_cap != null;
  const needRef = models.reference != null && (actor.use_kl_loss || algo.use_kl_in_reward);
  // As many rows per micro-batch as configured, or fewer when this update's longest row would not fit.
  const longest = Math.max(...rows.map((r) => r.promptIds.length + r.responseIds.length));
  const micro = fitMicroBatch(models.policy, microBatchFitOptions(config, longest, 0)).rows;
  // Old, reference and current log-probs are all taken at the sampling temperature (see scoringTemperature).
  const temperature = scoringTemperature(config.actor_rollout_ref.rollout.temperature);
  let t0 = performance.now();
  const old =
    needOld || algo.use_kl_in_reward
      ? await policyLogprobs(models, rows, micro, models.padId, temperature)
      : null;
  metrics["timing_s/old_log_prob"] = (performance.now() - t0) / 1000;
  t0 = performance.now();
  const ref = needRef
    ? computeLogprobs(models.reference!, rows, micro, models.padId, temperature).logprobs
    : null;
  metrics["timing_s/ref"] = (performance.now() - t0) / 1000;

  const mask = rows.map((r) => r.responseMask);
  let tokenPenalty: number[][] | undefined;
  if (algo.use_kl_in_reward && old && ref) {
    const beta = algo.kl_ctrl.kl_coef;
    const kl = old.logprobs.map((row, i) => row.map((lp, t) => klValue(lp, ref[i]![t]!, algo.kl_penalty)));
    tokenPenalty = kl.map((row) => row.map((k) => -beta * k));
    const flat = kl.flatMap((row, i) => row.filter((_, t) => mask[i]![t]));
    metrics["actor/reward_kl_penalty"] = mean(flat);
    metrics["actor/reward_kl_penalty_coeff"] = beta;
  }
  const values =
    algo.adv_estimator === "gae" && models.valueHead
      ? models.valueHead.values(models.policy, rows, micro, models.padId)
      : undefined;
  const adv = computeAdvantages({
    estimator: algo.adv_estimator,
    rows,
    mask,
    gamma: algo.gamma,
    lam: algo.lam,
    normByStd: algo.norm_adv_by_std_in_grpo,
    rolloutLevel: algo.rollout_level_advantage,
    tokenPenalty,
    values,
  });

  let tis: number[][] | null = null;
  if (actor.tis_imp_ratio_cap != null && old) {
    if (rows.every((r) => r.rolloutLogprobs)) {
      // The recorded rollout log-probs are raw (temperature 1, vLLM's default), so the trainer side of
      // the ratio is too: it measures the trainer/server mismatch on one scale whatever the temperature.
      const behaviour = rows.map((r) => r.rolloutLogprobs!);
      tis = tisWeights(old.rawLogprobs, behaviour, actor.tis_imp_ratio_cap);
      Object.assign(
        metrics,
        importanceWeightStats(old.rawLogprobs, behaviour, mask, actor.tis_imp_ratio_cap),
      );
    } else
      metrics["training/n_rows_without_rollout_logprobs"] = rows.filter((r) => !r.rolloutLogprobs).length;
  }
  const inputs: RowTensors[] = rows.map((_, i) => ({
    advantages: adv.advantages[i]!,
    oldLogprobs: old && needOld ? old.logprobs[i]! : null,
    refLogprobs: ref ? ref[i]! : null,
    tisWeights: tis ? tis[i]! : null,
  }));

  const optim = actor.optim;
  const warmup =
    optim.lr_warmup_steps >= 0 ? optim.lr_warmup_steps : Math.floor(optim.lr_warmup_steps_ratio * totalSteps);
  const updatesPerStep = actor.ppo_epochs * Math.max(1, Math.ceil(rows.length / miniBatchRows(config)));
  t0 = performance.now();
  const actorMetrics = await runActorUpdate(models, rows, inputs, {
    miniBatchRows: miniBatchRows(config),
    microBatchRows: micro,
    epochs: actor.ppo_epochs,
    shuffle: actor.shuffle,
    rng,
    padId: models.padId,
    clipLow: actor.clip_ratio_low!,
    clipHigh: actor.clip_ratio_high!,
    clipC: actor.clip_ratio_c,
    aggMode: actor.loss_agg_mode,
    lossScaleFactor: actor.loss_scale_factor ?? config.data.max_response_length,
    temperature,
    entropyCoeff: actor.entropy_coeff,
    useKlLoss: actor.use_kl_loss && ref != null,
    klLossCoef: actor.kl_loss_coef,
    klLossType: actor.kl_loss_type,
    gradClip: actor.grad_clip,
    lr: (s) =>
      learningRate(s, {
        lr: optim.lr,
        warmupSteps: warmup * updatesPerStep,
        totalSteps: totalSteps * updatesPerStep,
        style: optim.warmup_style,
        minLrRatio: optim.min_lr_ratio,
      }),
  });
  metrics["timing_s/update_actor"] = (performance.now() - t0) / 1000;
  Object.assign(metrics, actorMetrics);

  if (models.valueHead && values && adv.returns) {
    const critic = models.valueHead.update(models.policy, rows, values, adv.returns, {
      miniBatchRows: miniBatchRows(config),
      padId: models.padId,
      lr: config.critic.optim.lr,
      clip: config.critic.cliprange_value,
      gradClip: actor.grad_clip,
    });
    metrics["critic/vf_loss"] = critic.loss;
    metrics["critic/grad_norm"] = critic.gradNorm;
    metrics["critic/values/mean"] = mean(values.flatMap((row, i) => row.filter((_, t) => mask[i]![t])));
  }

  const trained = rows.flatMap((r, i) => adv.advantages[i]!.filter((_, t) => r.responseMask[t]));
  metrics["critic/score/mean"] = mean(rows.map((r) => r.score));
  metrics["critic/advantages/mean"] = mean(trained);
  metrics["critic/advantages/max"] = trained.length ? Math.max(...trained) : 0;
  metrics["critic/advantages/min"] = trained.length ? Math.min(...trained) : 0;
  metrics["response_length/mean"] = mean(rows.map((r) => r.responseIds.length));
  metrics["response_length/clip_ratio"] = mean(rows.map((r) => (r.responseTruncated ? 1 : 0)));
  metrics["prompt_length/mean"] = mean(rows.map((r) => r.promptIds.length));
  metrics["training/n_tokens"] = rows.reduce((a, r) => a + r.promptIds.length + r.responseIds.length, 0);
  return metrics;
}

/**
 * The importance weights exp(old - behaviour) on trained tokens before the cap: how far the weights that
 * sampled the rollouts (an older version under asynchronous training, or just the engine's numerics)
 * are from the ones being trained, and how often the cap bites.
 */
export function importanceWeightStats(
  oldLogprobs: readonly (readonly number[])[],
  behaviourLogprobs: readonly (readonly number[])[],
  mask: readonly (readonly number[])[],
  cap: number,
): Record<string, number> {
  const w: number[] = [];
  oldLogprobs.forEach((row, i) => {
    row.forEach((lp, t) => {
      if (mask[i]![t]) w.push(Math.exp(lp - behaviourLogprobs[i]![t]!));
    });
  });
  if (w.length === 0) return {};
  return {
    "actor/is_weight/mean": mean(w),
    "actor/is_weight/min": w.reduce((a, b) => Math.min(a, b), Infinity),
    "actor/is_weight/max": w.reduce((a, b) => Math.max(a, b), -Infinity),
    "actor/is_weight/clip_frac": w.filter((x) => x > cap).length / w.length,
  };
}
