import { parseOrThrow } from "@agl/core";
import { z } from "zod";

/**
 * PPO/GRPO configuration in the shape of VERL's Hydra config (what Agent Lightning's `VERL(config)`
 * takes), so a VERL user can carry their keys over. Every level is strict: an unknown or misspelled
 * key is an error naming its dotted path. Defaults follow the measured recipe for small policies on
 * CPU/WASM (platform notes: 16 prompts x group 8, temperature 1, lr 5e-4, clip 0.2, grad clip 1).
 */

const KlEstimator = z.enum(["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]);
export type KlEstimator = z.infer<typeof KlEstimator>;

export const AdvEstimatorSchema = z.enum(["grpo", "rloo", "reinforce_plus_plus", "gae"]);
export type AdvEstimator = z.infer<typeof AdvEstimatorSchema>;

export const LossAggModeSchema = z.enum([
  "token-mean",
  "seq-mean-token-sum",
  "seq-mean-token-mean",
  "per-rollout-mean",
]);
export type LossAggMode = z.infer<typeof LossAggModeSchema>;

const OptimSchema = z.strictObject({
  lr: z.number().positive().default(5e-4),
  betas: z.tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)]).default([0.9, 0.999]),
  eps: z.number().positive().default(1e-8),
  weight_decay: z.number().min(0).default(0),
  /** Warm-up steps; -1 means use `lr_warmup_steps_ratio`. */
  lr_warmup_steps: z.number().int().min(-1).default(-1),
  lr_warmup_steps_ratio: z.number().min(0).max(1).default(0),
  warmup_style: z.enum(["constant", "cosine", "linear"]).default("constant"),
  min_lr_ratio: z.number().min(0).max(1).default(0),
});

const AlgorithmSchema = z.strictObject({
  adv_estimator: AdvEstimatorSchema.default("grpo"),
  gamma: z.number().min(0).max(1).default(1),
  lam: z.number().min(0).max(1).default(1),
  norm_adv_by_std_in_grpo: z.boolean().default(true),
  use_kl_in_reward: z.boolean().default(false),
  kl_penalty: KlEstimator.default("kl"),
  kl_ctrl: z
    .strictObject({ type: z.enum(["fixed"]).default("fixed"), kl_coef: z.number().min(0).default(0.001) })
    .default({ type: "fixed", kl_coef: 0.001 }),
  /** Agent Lightning v1.0: one advantage per rollout, broadcast to all of its rows. */
  rollout_level_advantage: z.boolean().default(true),
  /** Rows of groups whose rollouts all got the same reward carry no signal under GRPO/RLOO: skip them. */
  skip_zero_variance_groups: z.boolean().default(true),
});

const DataSchema = z.strictObject({
  train_batch_size: z.number().int().min(1).default(16),
  /** Validation prompts per pass; null = the whole validation set. */
  val_batch_size: z.number().int().min(1).nullable().default(null),
  max_prompt_length: z.number().int().min(1).default(512),
  max_response_length: z.number().int().min(1).default(256),
  shuffle: z.boolean().default(true),
});

const RolloutSchema = z.strictObject({
  n: z.number().int().min(1).default(8),
  temperature: z.number().min(0).default(1),
  top_p: z.number().gt(0).max(1).default(1),
  top_k: z.number().int().min(-1).default(-1),
  val_kwargs: z
    .strictObject({
      n: z.number().int().min(1).default(1),
      temperature: z.number().min(0).default(0),
      top_p: z.number().gt(0).max(1).default(1),
      top_k: z.number().int().min(-1).default(-1),
    })
    .default({ n: 1, temperature: 0, top_p: 1, top_k: -1 }),
  /** Seconds a rollout may take before the store times it out (VERL/AGL default 1200). */
  timeout_seconds: z.number().positive().default(1200),
});

const ActorSchema = z.strictObject({
  /** In prompts, as in VERL (rows per mini-batch = ppo_mini_batch_size x rollout.n). */
  ppo_mini_batch_size: z.number().int().min(1).default(16),
  /** In rows; gradients of micro-batches are accumulated over a mini-batch. */
  ppo_micro_batch_size_per_gpu: z.number().int().min(1).default(64),
  ppo_epochs: z.number().int().min(1).default(1),
  shuffle: z.boolean().default(true),
  optim: OptimSchema.default(() => OptimSchema.parse({})),
  clip_ratio: z.number().positive().default(0.2),
  clip_ratio_low: z.number().positive().nullable().default(null),
  clip_ratio_high: z.number().positive().nullable().default(null),
  /** Dual-clip bound for negative advantages (> 1). */
  clip_ratio_c: z.number().gt(1).default(3),
  use_kl_loss: z.boolean().default(false),
  kl_loss_coef: z.number().min(0).default(0.001),
  kl_loss_type: KlEstimator.default("low_var_kl"),
  entropy_coeff: z.number().default(0),
  loss_agg_mode: LossAggModeSchema.default("token-mean"),
  /** Max global gradient norm; <= 0 disables clipping. */
  grad_clip: z.number().default(1),
  /** Truncated importance sampling cap against the rollout log-probs; null disables. */
  tis_imp_ratio_cap: z.number().gt(0).nullable().default(null),
});

const CriticSchema = z.strictObject({
  optim: z.strictObject({ lr: z.number().positive().default(1e-3) }).default({ lr: 1e-3 }),
  cliprange_value: z.number().positive().default(0.5),
  /** Width of the value head's hidden layer over the features it reads. */
  hidden_size: z.number().int().min(1).default(64),
});

const TrainerSchema = z.strictObject({
  total_epochs: z.number().int().min(1).default(1),
  /** Stop after this many steps (null = total_epochs worth of batches). */
  total_training_steps: z.number().int().min(1).nullable().default(null),
  /** Validate every k steps (and after the last); <= 0 disables periodic validation. */
  test_freq: z.number().int().default(5),
  /** Checkpoint every k steps; <= 0 only at exit. */
  save_freq: z.number().int().default(-1),
  val_before_train: z.boolean().default(true),
  /** Where checkpoints, metrics.jsonl and the plot go. */
  default_local_dir: z.string().min(1).default("checkpoints"),
  resume_mode: z.enum(["auto", "disable"]).default("auto"),
  project_name: z.string().default("agl"),
  experiment_name: z.string().default("ppo"),
  seed: z.number().int().default(1),
  logger: z.array(z.enum(["console", "jsonl", "progress"])).default(["console", "jsonl"]),
});

const AgentLightningSchema = z.strictObject({
  trace_aggregator: z
    .strictObject({ level: z.enum(["transition", "trajectory"]).default("transition") })
    .default({ level: "transition" }),
  /** Seconds between checks for finished rollouts while waiting. */
  poll_interval_seconds: z.number().positive().default(0.2),
});

export const PPOConfigSchema = z.strictObject({
  algorithm: AlgorithmSchema.default(() => AlgorithmSchema.parse({})),
  data: DataSchema.default(() => DataSchema.parse({})),
  actor_rollout_ref: z
    .strictObject({
      rollout: RolloutSchema.default(() => RolloutSchema.parse({})),
      actor: ActorSchema.default(() => ActorSchema.parse({})),
    })
    .default(() => ({ rollout: RolloutSchema.parse({}), actor: ActorSchema.parse({}) })),
  critic: CriticSchema.default(() => CriticSchema.parse({})),
  trainer: TrainerSchema.default(() => TrainerSchema.parse({})),
  agentlightning: AgentLightningSchema.default(() => AgentLightningSchema.parse({})),
});

export type PPOConfig = z.infer<typeof PPOConfigSchema>;
export type PPOConfigInput = z.input<typeof PPOConfigSchema>;

/** Validate a (partial) config, filling defaults; errors name the offending key ("actor_rollout_ref.actor.lr"). */
export function parsePPOConfig(input: PPOConfigInput | unknown = {}): PPOConfig {
  const config = parseOrThrow(PPOConfigSchema, input ?? {}, "config");
  const actor = config.actor_rollout_ref.actor;
  actor.clip_ratio_low ??= actor.clip_ratio;
  actor.clip_ratio_high ??= actor.clip_ratio;
  return config;
}

/** Rows per PPO mini-batch (VERL multiplies the prompt count by rollout.n). */
export function miniBatchRows(config: PPOConfig): number {
  return config.actor_rollout_ref.actor.ppo_mini_batch_size * config.actor_rollout_ref.rollout.n;
}
