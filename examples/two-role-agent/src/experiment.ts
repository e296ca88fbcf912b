import { InMemoryLightningStore, type LightningStore, type Logger, silentLogger, Trainer } from "@agl/core";
import {
  addLoraAdapter,
  type PolicySpecs,
  PPO,
  type PPOConfigInput,
  type PPOResult,
  type PretrainedPolicy,
  type RewardMapper,
  type SftExample,
  sft,
} from "@agl/trainer-gpu";
import { MAX_REPLY_TOKENS, twoRoleAgent } from "./agent.js";
import { describeScores, evaluateRoles, type RoleScores } from "./evaluate.js";
import { SETTINGS } from "./settings.js";
import { demonstrations, type Problem, type Splits } from "./task.js";

/**
 * The pieces of the example, shared by its job (`main.ts`) and the bench (`bench/two-role.ts`): the
 * warm-up, the two ways of adapting the roles, training through the real stack, held-out scores.
 */

export type Arm = "per-role" | "shared";

/** The adapters an arm adds, the policies it declares, and the model name each role is served under. */
export function armLayout(arm: Arm, rank: number = SETTINGS.grpo.rank) {
  const scale = SETTINGS.grpo.scale;
  if (arm === "per-role")
    return {
      adapters: [
        { name: "writer", rank, alpha: scale * rank },
        { name: "checker", rank, alpha: scale * rank },
      ],
      policies: { writer: {}, checker: {} } as PolicySpecs,
      models: { writer: "writer", checker: "checker" },
    };
  return {
    adapters: [{ name: "shared", rank: 2 * rank, alpha: scale * 2 * rank }],
    policies: { writer: { adapter: "shared" }, checker: { adapter: "shared" } } as PolicySpecs,
    models: { writer: "shared", checker: "shared" },
  };
}

/** Format-only SFT of the whole fresh model (the same for both arms of a seed). */
export async function warmUp(
  policy: PretrainedPolicy,
  splits: Splits,
  seed: number,
  o: { steps?: number; learningRate?: number } = {},
): Promise<{ loss: number; seconds: number }> {
  const t0 = performance.now();
  const w = SETTINGS.warmup;
  const demos = demonstrations(splits.train, { n: w.demos, ...w, seed }) as unknown as SftExample[];
  const res = await sft(policy.model, demos, {
    template: policy.template,
    steps: o.steps ?? w.steps,
    batchSize: w.batchSize,
    learningRate: o.learningRate ?? w.learningRate,
    warmupSteps: 10,
    schedule: "linear",
    seed,
    progress: false,
  });
  res.optimizer.dispose();
  return { loss: res.losses.at(-1)!, seconds: (performance.now() - t0) / 1000 };
}

export interface HeldOut {
  greedy: RoleScores;
  sampled: RoleScores;
}

export async function heldOut(
  policy: PretrainedPolicy,
  problems: readonly Problem[],
  models: { writer: string; checker: string },
  seed: number,
): Promise<HeldOut> {
  const repeated = Array.from({ length: SETTINGS.evalSamples }, () => problems).flat();
  const [greedy, sampled] = await Promise.all([
    evaluateRoles(policy, problems, { temperature: 0, seed, models }),
    evaluateRoles(policy, repeated, { temperature: 1, seed: seed + 1, models }),
  ]);
  return { greedy, sampled };
}

export const describeHeldOut = (h: HeldOut) =>
  `greedy ${describeScores(h.greedy)}; sampled ${describeScores(h.sampled)}`;

export interface GrpoOptions {
  arm: Arm;
  seed: number;
  out: string;
  steps?: number;
  problemsPerStep?: number;
  rolloutsPerProblem?: number;
  learningRate?: number;
  /** Reward credit of both roles: the final reward (default) or each role's own. */
  credit?: "final" | "own";
  /** Roles left untrained (served as they are; default: both trained). */
  frozen?: ReadonlyArray<"writer" | "checker">;
  /** The run's store (default: a fresh in-memory one). */
  store?: LightningStore;
  /** Where the trainer logs (default: nowhere). */
  logger?: Logger;
  /** Replace each step's final rewards (a control; see `PPOOptions.mapRewards`). */
  mapRewards?: RewardMapper;
  onStep?: (step: number, metrics: Record<string, number>) => void;
}

export function grpoConfig(o: GrpoOptions): PPOConfigInput {
  const g = SETTINGS.grpo;
  const problems = o.problemsPerStep ?? g.problemsPerStep;
  return {
    algorithm: { adv_estimator: "grpo" },
    data: { train_batch_size: problems, max_prompt_length: 96, max_response_length: MAX_REPLY_TOKENS },
    actor_rollout_ref: {
      rollout: { n: o.rolloutsPerProblem ?? g.rolloutsPerProblem, temperature: 1 },
      actor: {
        // Every call of a step in one mini-batch: one optimizer step per adapter and step in both arms
        // (a mini-batch counts rollouts; a role makes one or two calls per rollout).
        ppo_mini_batch_size: 4 * problems,
        ppo_micro_batch_size_per_gpu: 64,
        clip_ratio: 0.2,
        optim: { lr: o.learningRate ?? g.learningRate, lr_warmup_steps: 3 },
      },
    },
    trainer: {
      total_training_steps: o.steps ?? g.steps,
      test_freq: -1,
      save_freq: -1,
      val_before_train: false,
      default_local_dir: o.out,
      logger: ["jsonl"],
      experiment_name: `two-role-${o.arm}`,
      seed: o.seed,
    },
    agentlightning: { trace_aggregator: { level: "transition" } },
  };
}

/** Add the arm's adapters to the warmed-up model; returns the model name each role is served under. */
export function addArmAdapters(policy: PretrainedPolicy, arm: Arm, seed: number) {
  const layout = armLayout(arm);
  for (const [i, a] of layout.adapters.entries())
    addLoraAdapter(policy.model, a.name, { rank: a.rank, alpha: a.alpha, seed: seed * 10 + i });
  return layout.models;
}

/**
 * Train the arm's adapters (added with `addArmAdapters`) with GRPO through the core Trainer: the
 * in-process runner runs the unchanged agent, whose roles reach their adapters through the LLM proxy.
 */
export async function trainArm(
  policy: PretrainedPolicy,
  train: readonly Problem[],
  o: GrpoOptions,
): Promise<{ result: PPOResult; seconds: number }> {
  const t0 = performance.now();
  const credit = o.credit ?? "final";
  const policies = Object.fromEntries(
    Object.entries(armLayout(o.arm).policies).map(([name, spec]) => [
      name,
      { ...spec, reward: credit, train: !o.frozen?.includes(name as "writer") },
    ]),
  );
  const trainer = new Trainer({
    algorithm: new PPO<Problem>({
      config: grpoConfig(o),
      policy,
      policies,
      handleSignals: false,
      ...(o.onStep ? { onStep: o.onStep } : {}),
      ...(o.mapRewards ? { mapRewards: o.mapRewards } : {}),
    }),
    store: o.store ?? new InMemoryLightningStore(),
    runnerConcurrency: 64,
    pollIntervalMs: 10,
    logger: o.logger ?? silentLogger,
  });
  const { result } = await trainer.fit<Problem, PPOResult>(twoRoleAgent, [...train]);
  return { result, seconds: (performance.now() - t0) / 1000 };
}
