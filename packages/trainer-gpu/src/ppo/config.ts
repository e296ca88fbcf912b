import { InvalidArgumentError, parseOrThrow } from "@agl/core";
import { z } from "zod";

/**
 * PPO/GRPO configuration in the shape of VERL's Hydra config (what Agent Lightning's `VERL(config)`
 * takes), so a VERL user can carry their keys over. Every level is strict: an unknown or misspelled
 * key is an error naming its dotted path, except the well-known VERL keys in `VERL_IGNORED_KEYS`, which
 * are accepted (so a real VERL config loads) but have no effect here; `ignoredConfigKeys` lists the ones
 * a config sets, and the PPO algorithm warns about them. Defaults follow the measured recipe for small policies on
 * CPU/WASM (platform notes: 16 prompts x group 8, temperature 1, lr 5e-4, clip 0.2, grad clip 1).
 */

/**
 * Well-known VERL keys with no effect in this trainer, by section ("" = top level). They configure
 * what PPOOptions provide directly (the model and tokenizer: `actor_rollout_ref.model`, `data.tokenizer`),
 * what does not exist here (Ray, FSDP/Megatron, vLLM engine knobs, reward-model workers, HDFS, multi-GPU
 * sharding and dynamic batch sizes), or a separate reference/critic worker this trainer shares with the
 * actor (`actor_rollout_ref.ref`, `critic.model`, the critic's own batch sizes). Values are not checked.
 */
export const VERL_IGNORED_KEYS = {
  "": ["reward_model", "custom_reward_function", "ray_init", "ray_kwargs", "global_profiler"],
  algorithm: ["use_pf_ppo", "pf_ppo", "filter_groups"],
  data: [
    "tokenizer",
    "train_files",
    "val_files",
    "prompt_key",
    "reward_fn_key",
    "return_raw_chat",
    "return_raw_input_ids",
    "return_full_prompt",
    "truncation",
    "filter_overlong_prompts",
    "filter_overlong_prompts_workers",
    "trust_remote_code",
    "use_shm",
    "dataloader_num_workers",
    "custom_cls",
  ],
  actor_rollout_ref: ["model", "ref", "hybrid_engine", "nccl_timeout"],
  "actor_rollout_ref.actor": [
    "strategy",
    "ppo_micro_batch_size",
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "ulysses_sequence_parallel_size",
    "use_torch_compile",
    "fsdp_config",
    "megatron",
    "checkpoint",
    "profiler",
    "entropy_from_logits_with_chunking",
    "entropy_checkpointing",
    "use_fused_kernels",
  ],
  "actor_rollout_ref.actor.optim": ["total_training_steps", "num_cycles"],
  "actor_rollout_ref.rollout": [
    "name",
    "mode",
    "tensor_model_parallel_size",
    "gpu_memory_utilization",
    "log_prob_micro_batch_size",
    "log_prob_micro_batch_size_per_gpu",
    "log_prob_use_dynamic_bsz",
    "log_prob_max_token_len_per_gpu",
    "dtype",
    "enforce_eager",
    "free_cache_engine",
    "load_format",
    "prompt_length",
    "response_length",
    "max_num_batched_tokens",
    "max_model_len",
    "max_num_seqs",
    "enable_chunked_prefill",
    "disable_log_stats",
    "do_sample",
    "ignore_eos",
    "engine_kwargs",
    "multi_turn",
    "agent",
    "calculate_log_probs",
    "layered_summon",
  ],
  critic: [
    "model",
    "strategy",
    "enable",
    "ppo_mini_batch_size",
    "ppo_micro_batch_size",
    "ppo_micro_batch_size_per_gpu",
    "ppo_epochs",
    "shuffle",
    "grad_clip",
    "loss_agg_mode",
    "rollout_n",
    "use_dynamic_bsz",
    "ppo_max_token_len_per_gpu",
    "forward_max_token_len_per_gpu",
    "ulysses_sequence_parallel_size",
    "checkpoint",
  ],
  "critic.optim": [
    "betas",
    "weight_decay",
    "lr_warmup_steps",
    "lr_warmup_steps_ratio",
    "warmup_style",
    "min_lr_ratio",
    "total_training_steps",
  ],
  trainer: [
    "n_gpus_per_node",
    "nnodes",
    "device",
    "critic_warmup",
    "log_val_generations",
    "rollout_data_dir",
    "validation_data_dir",
    "default_hdfs_dir",
    "del_local_ckpt_after_load",
    "max_actor_ckpt_to_keep",
    "max_critic_ckpt_to_keep",
    "ray_wait_register_center_timeout",
    "balance_batch",
    "resume_from_path",
    "esi_redundant_time",
  ],
  agentlightning: ["port"],
} as const satisfies Record<string, readonly string[]>;

type IgnoredShape<K extends readonly string[]> = { [P in K[number]]: z.ZodOptional<z.ZodUnknown> };

/** Schema entries accepting (and not checking) a section's ignored VERL keys. */
function ignored<const K extends readonly string[]>(keys: K): IgnoredShape<K> {
  return Object.fromEntries(keys.map((k) => [k, z.unknown().optional()])) as IgnoredShape<K>;
}

const KlEstimator = z.enum(["kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3"]);
export type KlEstimator = z.infer<typeof KlEstimator>;

export const AdvEstimatorSchema = z.enum(["grpo", "rloo", "reinforce_plus_plus", "gae"]);
export type AdvEstimator = z.infer<typeof AdvEstimatorSchema>;

/**
 * VERL's `loss_agg_mode` names plus Agent Lightning v1.0's `per_rollout_mean`. "per-rollout-mean" (this
 * package's earlier spelling) is still accepted and normalised, so old configs keep working.
 */
export const LossAggModeSchema = z
  .enum([
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
    "per_rollout_mean",
    "per-rollout-mean",
  ])
  .transform((mode) => (mode === "per-rollout-mean" ? "per_rollout_mean" : mode));
export type LossAggMode = z.output<typeof LossAggModeSchema>;

const OptimSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS["actor_rollout_ref.actor.optim"]),
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
  ...ignored(VERL_IGNORED_KEYS.algorithm),
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
  /**
   * Drop the rows of groups whose rollouts all got the same reward. Off by default, as in VERL: such rows
   * get advantage 0 (no policy-gradient signal) but still count in the loss's normaliser (token-mean)
   * and in entropy/KL terms. On: less compute per step once most groups agree, a larger effective step.
   */
  skip_zero_variance_groups: z.boolean().default(false),
});

const DataSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS.data),
  train_batch_size: z.number().int().min(1).default(16),
  /** Validation prompts per pass; null = the whole validation set. */
  val_batch_size: z.number().int().min(1).nullable().default(null),
  max_prompt_length: z.number().int().min(1).default(512),
  max_response_length: z.number().int().min(1).default(256),
  shuffle: z.boolean().default(true),
});

const RolloutSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS["actor_rollout_ref.rollout"]),
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
  /**
   * Asynchronous training: how many policy versions a rollout may lag behind the weights that train on
   * it (verl's `max_off_policy_steps`, AReaL's `max_head_offpolicyness`). 0 = the synchronous loop.
   * With k > 0, rollouts keep running while the optimiser trains; a group is admitted only if it will be
   * trained at most k versions after the one that starts serving it, and none is ever discarded for
   * lateness. Needs `actor.tis_imp_ratio_cap` (the off-policy correction).
   */
  max_staleness: z.number().int().min(0).default(0),
  /**
   * Partial rollouts (needs max_staleness > 0): at each publication the engine moves every non-streamed
   * generation in flight to the new weights at its next decode step, instead of finishing it on the
   * version it started on (see `VersionedEngine`'s `inFlight: "resume"`). Tokens keep the log-probs they
   * were sampled with; staleness counts from the version a request started on. Needs an engine that can
   * do it: the default in-process server can, vLLM (`externalEngine`) cannot.
   */
  partial_rollouts: z.boolean().default(false),
});

const ActorSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS["actor_rollout_ref.actor"]),
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
  /** Divisor of `seq-mean-token-sum-norm` (VERL); null = `data.max_response_length`, a constant as
   * Dr. GRPO intends (VERL's fallback, the padded batch width, changes from batch to batch). */
  loss_scale_factor: z.number().positive().nullable().default(null),
  /** Max global gradient norm; <= 0 disables clipping. */
  grad_clip: z.number().default(1),
  /** Truncated importance sampling cap against the rollout log-probs; null disables. */
  tis_imp_ratio_cap: z.number().gt(0).nullable().default(null),
});

const CriticSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS.critic),
  optim: z
    .strictObject({ ...ignored(VERL_IGNORED_KEYS["critic.optim"]), lr: z.number().positive().default(1e-3) })
    .default({ lr: 1e-3 }),
  cliprange_value: z.number().positive().default(0.5),
  /** Width of the value head's hidden layer over the features it reads. */
  hidden_size: z.number().int().min(1).default(64),
});

const TrainerSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS.trainer),
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
  ...ignored(VERL_IGNORED_KEYS.agentlightning),
  trace_aggregator: z
    .strictObject({ level: z.enum(["transition", "trajectory"]).default("transition") })
    .default({ level: "transition" }),
  /** Seconds between checks for finished rollouts while waiting. */
  poll_interval_seconds: z.number().positive().default(0.2),
  /**
   * Failed rollouts (the agent threw, or its attempt timed out): "zero_reward" (default, as Agent
   * Lightning) trains on whatever LLM calls they recorded with reward 0, so failing is penalised rather
   * than invisible; "drop" leaves them out of the batch. Cancelled rollouts are always left out.
   */
  failed_rollouts: z.enum(["zero_reward", "drop"]).default("zero_reward"),
});

export const PPOConfigSchema = z.strictObject({
  ...ignored(VERL_IGNORED_KEYS[""]),
  algorithm: AlgorithmSchema.default(() => AlgorithmSchema.parse({})),
  data: DataSchema.default(() => DataSchema.parse({})),
  actor_rollout_ref: z
    .strictObject({
      ...ignored(VERL_IGNORED_KEYS.actor_rollout_ref),
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
  if (config.actor_rollout_ref.rollout.max_staleness > 0 && actor.tis_imp_ratio_cap == null) {
    // Without the behaviour-policy correction a stale rollout would be trained on as if sampled by the
    // current weights: a biased gradient that grows with the staleness.
    throw new InvalidArgumentError(
      "config.actor_rollout_ref.actor.tis_imp_ratio_cap",
      "must be set (e.g. 2) when actor_rollout_ref.rollout.max_staleness > 0: stale rollouts are weighted by it",
    );
  }
  const rollout = config.actor_rollout_ref.rollout;
  if (rollout.partial_rollouts && rollout.max_staleness === 0) {
    // The synchronous loop publishes only between steps, when nothing is in flight.
    throw new InvalidArgumentError(
      "config.actor_rollout_ref.rollout.partial_rollouts",
      "needs actor_rollout_ref.rollout.max_staleness > 0: the synchronous loop never publishes while a rollout is in flight",
    );
  }
  return config;
}

/** Rows per PPO mini-batch (VERL multiplies the prompt count by rollout.n). */
export function miniBatchRows(config: PPOConfig): number {
  return config.actor_rollout_ref.actor.ppo_mini_batch_size * config.actor_rollout_ref.rollout.n;
}

/** Dotted paths of the `VERL_IGNORED_KEYS` that `input` sets (they are accepted but have no effect). */
export function ignoredConfigKeys(input: unknown): string[] {
  const found: string[] = [];
  for (const [section, keys] of Object.entries(VERL_IGNORED_KEYS)) {
    let node: unknown = input;
    for (const part of section ? section.split(".") : []) {
      node = isPlainObject(node) ? node[part] : undefined;
    }
    if (!isPlainObject(node)) continue;
    for (const key of keys) if (node[key] !== undefined) found.push(section ? `${section}.${key}` : key);
  }
  return found;
}

/**
 * Dotted paths where two configs differ (leaves and arrays compared by value; a key present on one side
 * only counts). Both sides are compared as JSON, the form a checkpoint stores the config in.
 */
export function configDifferences(saved: unknown, current: unknown): string[] {
  const walk = (a: unknown, b: unknown, path: string): string[] => {
    if (isPlainObject(a) && isPlainObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
      return keys.flatMap((k) => walk(a[k], b[k], path ? `${path}.${k}` : k));
    }
    return JSON.stringify(a) === JSON.stringify(b) ? [] : [path || "(whole config)"];
  };
  const asJson = (v: unknown) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
  return walk(asJson(saved), asJson(current), "");
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
