import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { consoleLogger, Trainer } from "@agl/core";
import { SqliteLightningStore } from "@agl/store";
import {
  type CausalLM,
  type ChatEncoder,
  type ChatMessage,
  type EncodeChatOptions,
  type EncodedChat,
  loadPretrainedPolicy,
  type PolicyBundle,
  type PolicyWorkers,
  PPO,
  type PPOConfigInput,
  type PPOResult,
  type PretrainedPolicy,
  type RewardMapper,
  type SftExample,
  type SftOptions,
  sft,
  sftLoss,
  type ToolDefinition,
} from "@agl/trainer-gpu";
import { calcAgent, type SolveOptions } from "./agent.js";
import { copyCheckpoint } from "./base.js";
import { writeInitialCheckpoint } from "./checkpoint.js";
import { type CopyAccuracy, copyAccuracy } from "./copy-accuracy.js";
import { type Demo, demonstrations, type Problem, type Splits } from "./dataset.js";
import { type EvalResult, evaluatePolicy } from "./evaluate.js";

/**
 * The pieces of the calc-agent experiment, shared by the job (`main.ts`) and the controls bench
 * (`bench/calc-agent.ts`): the policy, the held-out evaluation, SFT to its plateau, more SFT with a
 * fixed compute budget, and GRPO (optionally with a reward mapping, for the shuffled-reward control).
 * Everything is a fixed amount of work for a seed: nothing stops on the clock.
 */

/**
 * A chat template that renders each conversation once: SFT runs in chunks between validations, and each
 * chunk would otherwise re-render (jinja) and re-tokenize all 4000 demonstrations on the main thread.
 */
export class CachedChatEncoder implements ChatEncoder {
  private readonly cache = new Map<string, EncodedChat>();
  constructor(private readonly inner: ChatEncoder) {}
  get tokenizer() {
    return this.inner.tokenizer;
  }
  encodeChat(
    messages: readonly ChatMessage[],
    tools?: readonly ToolDefinition[] | null,
    options?: EncodeChatOptions,
  ): EncodedChat {
    const key = JSON.stringify([messages, tools ?? null, options ?? null]);
    let hit = this.cache.get(key);
    if (!hit) {
      hit = this.inner.encodeChat(messages, tools, options);
      this.cache.set(key, hit);
    }
    return hit;
  }
  parseToolCalls(text: string) {
    return this.inner.parseToolCalls(text);
  }
}

export const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

export interface HeldOut {
  greedy: EvalResult;
  /** Temperature 1, two samples per problem. */
  sampled: EvalResult;
}

/** Mean of greedy and sampled accuracy: what picks the best SFT checkpoint (on the validation split). */
export const heldOutScore = (h: HeldOut) => (h.greedy.accuracy + h.sampled.accuracy) / 2;

/**
 * Write the job's starting checkpoint to `dir` and load it (full fine-tuning: SFT trains every weight):
 * a copy of the pretrained checkpoint folder `base` (src/base.ts) or, without one, an untrained checkpoint
 * whose weights are drawn from `seed`.
 */
export async function createPolicy(dir: string, seed: number, base?: string): Promise<PretrainedPolicy> {
  if (base === undefined) await writeInitialCheckpoint(dir, seed);
  else await copyCheckpoint(base, dir);
  return loadPretrainedPolicy(dir);
}

/** Greedy accuracy, and sampled accuracy (temperature 1, `samples` per problem), on held-out problems. */
export async function heldOut(
  policy: PolicyBundle,
  problems: readonly Problem[],
  seed: number,
  workers?: PolicyWorkers,
  options: SolveOptions & { samples?: number } = {},
): Promise<HeldOut> {
  const serve = workers?.serve;
  const { samples = 2, ...solve } = options;
  const repeated = Array.from({ length: samples }, () => problems).flat();
  // Both at once keeps the generator's batches (and both workers) full; every episode has its own seed, so
  // the results are the same as one after the other.
  const [greedy, sampled] = await Promise.all([
    evaluatePolicy(policy, problems, { temperature: 0, seed, serve, solve }),
    evaluatePolicy(policy, repeated, { temperature: 1, seed: seed + 1, serve, solve }),
  ]);
  return { greedy, sampled };
}

export const describeHeldOut = (h: HeldOut) =>
  `greedy ${pct(h.greedy.accuracy)} (two calls ${pct(h.greedy.chained)}), sampled ${pct(h.sampled.accuracy)} (two calls ${pct(h.sampled.chained)})`;

export const describeCopy = (c: CopyAccuracy) =>
  `digits copied ${pct(c.all)} (first call ${pct(c.first)}, carried result ${pct(c.carried)}, second operand ${pct(c.second)}, answer ${pct(c.answer)})`;

export interface SftSettings {
  batchSize: number;
  learningRate: number;
  /** Rows per gradient micro-batch (a fixed split, so one thread and two workers compute the same sums). */
  microBatchSize: number;
  workers?: PolicyWorkers;
  seed: number;
  log: (line: string) => void;
}

export interface SftPlateauOptions extends SftSettings {
  /** Share of demonstrations that do the second step with the calculator too (the rest in the head). */
  chainShare: number;
  /** Evaluate on the validation split every this many steps. */
  evalEvery: number;
  /**
   * Stop after this many evaluations in which neither the validation loss (on demonstrations written for
   * the validation problems) nor validation accuracy improved...
   */
  patience: number;
  /** ...or after this many steps (cool-down not included). */
  maxSteps: number;
  /** Then this many steps with the learning rate falling linearly to 0, validated like the others. */
  coolDownSteps: number;
  /** Validation loss on the demonstrations for the first this-many validation problems. */
  valLossExamples: number;
  /** Validation accuracy on the first this-many validation problems (greedy and one sample each). */
  valProblems: number;
  /**
   * Before the validated phase, this many steps on the same demonstrations rendered by the same chat
   * template without the tool preamble: rows of ~100 tokens instead of ~250, where the copying of numbers
   * is learnt for a third of the compute (it is position-relative, so it carries over to the full rows).
   */
  shortSteps?: number;
}

export interface SftCurvePoint {
  step: number;
  /** Training loss of the last step. */
  loss: number;
  /** Loss on demonstrations for the validation problems (never trained on). */
  valLoss: number;
  /** Teacher-forced digit accuracy on two-call solutions of the same validation problems. */
  copy: CopyAccuracy;
  val: HeldOut;
}

export interface SftPlateau {
  demos: Demo[];
  bestStep: number;
  /** Validation accuracy of the best checkpoint (the weights the policy holds afterwards). */
  bestVal: HeldOut;
  curve: SftCurvePoint[];
  steps: number;
  seconds: number;
}

/**
 * SFT from scratch on imperfect demonstrations to its plateau, warmup-stable-decay style: a constant
 * learning rate, validated every `evalEvery` steps, until `patience` validations in a row improved neither
 * validation loss (by 0.5%) nor validation accuracy (by 1 point); then a cool-down of `coolDownSteps` with
 * the rate falling linearly to 0, which settles the weights. Accuracy alone would stop too early: it stays
 * flat while the model is still learning to copy numbers into tool calls, which the loss shows. The policy
 * ends holding the checkpoint with the best validation accuracy of all those validated.
 */
export async function sftToPlateau(
  policy: PolicyBundle,
  splits: Splits,
  o: SftPlateauOptions,
): Promise<SftPlateau> {
  const t0 = performance.now();
  const template = new CachedChatEncoder(policy.template);
  const demos = demonstrations(splits.demo, o.chainShare, o.seed);
  const valDemos = demonstrations(splits.val, o.chainShare, o.seed + 1) as unknown as SftExample[];
  let bestValLoss = Number.POSITIVE_INFINITY;
  let bestScoreForPatience = Number.NEGATIVE_INFINITY;
  const curve: SftCurvePoint[] = [];
  let best: { step: number; val: HeldOut; weights: CausalLM } | null = null;
  let optimizer: Awaited<ReturnType<typeof sft>>["optimizer"] | undefined;
  let steps = 0;
  let sinceBest = 0;
  let cooled = false;
  const shortSteps = o.shortSteps ?? 0;
  // One chunk of SFT at the job's batch and rate, continuing the optimizer.
  const chunk = (data: readonly Demo[], n: number, extra: Partial<SftOptions>) =>
    sft(policy.model, data as unknown as SftExample[], {
      template,
      steps: n,
      batchSize: o.batchSize,
      microBatchSize: o.microBatchSize,
      workers: o.workers,
      learningRate: o.learningRate,
      optimizer,
      ...extra,
    });
  if (shortSteps > 0) {
    const short = demos.map((d) => ({ messages: d.messages, tools: null })) as unknown as Demo[];
    for (let done = 0; done < shortSteps; done += o.evalEvery) {
      const n = Math.min(o.evalEvery, shortSteps - done);
      const res = await chunk(short, n, {
        warmupSteps: done === 0 ? 20 : 0,
        seed: o.seed * 1000 + 500 + done,
      });
      optimizer = res.optimizer;
      const copy = copyAccuracy(policy.model, template, splits.val.slice(0, o.valLossExamples), 16, false);
      o.log(
        `[calc-agent] SFT step ${done + n} (rows without the tool preamble): loss ${res.losses.at(-1)!.toFixed(3)}, ${describeCopy(copy)}`,
      );
    }
  }
  while (!cooled) {
    // The last chunk is the cool-down: one linear fall of the rate to 0, validated at its end.
    const coolDown = steps >= o.maxSteps || sinceBest >= o.patience;
    const n = coolDown ? o.coolDownSteps : Math.min(o.evalEvery, o.maxSteps - steps);
    const res = await chunk(demos, n, {
      ...(coolDown
        ? { schedule: "linear" as const }
        : { warmupSteps: steps === 0 && shortSteps === 0 ? 10 : 0 }),
      seed: o.seed * 1000 + curve.length,
    });
    optimizer = res.optimizer;
    steps += n;
    cooled = coolDown;
    const val = await heldOut(policy, splits.val.slice(0, o.valProblems), o.seed * 7 + 3, o.workers, {
      samples: 1,
    });
    const loss = res.losses.at(-1)!;
    const valLoss = sftLoss(policy.model, valDemos.slice(0, o.valLossExamples), { template }).loss;
    const copy = copyAccuracy(policy.model, template, splits.val.slice(0, o.valLossExamples));
    curve.push({ step: shortSteps + steps, loss, valLoss, copy, val });
    const better = !best || heldOutScore(val) > heldOutScore(best.val);
    if (better) {
      best?.weights.dispose();
      best = { step: shortSteps + steps, val, weights: policy.model.clone({ trainable: false }) };
    }
    const lossImproved = valLoss < bestValLoss * 0.995;
    bestValLoss = Math.min(bestValLoss, valLoss);
    const clearlyBetter = better && heldOutScore(val) >= bestScoreForPatience + 0.01;
    if (clearlyBetter) bestScoreForPatience = heldOutScore(val);
    sinceBest = clearlyBetter || lossImproved ? 0 : sinceBest + 1;
    o.log(
      `[calc-agent] SFT step ${shortSteps + steps}${cooled ? " (after the cool-down)" : ""}: loss ${loss.toFixed(3)}, validation loss ${valLoss.toFixed(3)}, ${describeCopy(copy)}; validation ${describeHeldOut(val)}${better ? " (best so far)" : ""}`,
    );
  }
  policy.model.setWeightsFrom(best!.weights);
  best!.weights.dispose();
  optimizer?.dispose();
  return {
    demos,
    bestStep: best!.step,
    bestVal: best!.val,
    curve,
    steps: shortSteps + steps,
    seconds: (performance.now() - t0) / 1000,
  };
}

/** How much more SFT a control runs, and with what optimizer schedule (see `moreSft`). */
export interface MoreSftPlan {
  steps: number;
  batchSize: number;
  learningRate: number;
  warmupSteps: number;
  /** "constant": hold the rate after the warm-up, as GRPO does; "linear": fall to 0, a new SFT cycle. */
  schedule: "constant" | "linear";
}

/**
 * The "more SFT" control: continue SFT on the same demonstrations from the given weights with a fresh
 * Adam, for `plan.steps` steps of `plan.batchSize` demonstrations, forward and backward. The bench runs it
 * twice: matched to GRPO (its optimizer steps, rows per step, learning rate and warm-up, so only the
 * objective differs) and as another cycle of the SFT recipe (its peak rate, linear cool-down).
 */
export async function moreSft(
  policy: PolicyBundle,
  demos: readonly Demo[],
  plan: MoreSftPlan,
  o: Pick<SftSettings, "microBatchSize" | "workers" | "seed" | "log">,
): Promise<{ steps: number; sequences: number; tokens: number; seconds: number }> {
  const t0 = performance.now();
  let tokens = 0;
  const res = await sft(policy.model, demos as unknown as SftExample[], {
    template: policy.template,
    steps: plan.steps,
    batchSize: plan.batchSize,
    microBatchSize: o.microBatchSize,
    workers: o.workers,
    learningRate: plan.learningRate,
    warmupSteps: plan.warmupSteps,
    schedule: plan.schedule,
    seed: o.seed * 1000 + 500,
    onStep: (info) => {
      tokens += info.sequenceTokens;
    },
  });
  res.optimizer.dispose();
  o.log(
    `[calc-agent] more SFT: ${plan.steps} steps x ${plan.batchSize} demonstrations, ${tokens.toLocaleString()} tokens`,
  );
  return {
    steps: plan.steps,
    sequences: plan.steps * plan.batchSize,
    tokens,
    seconds: (performance.now() - t0) / 1000,
  };
}

export interface GrpoOptions {
  steps: number;
  problemsPerStep: number;
  rolloutsPerProblem: number;
  seed: number;
  out: string;
  /** Validate (sampled, one per problem, the first `valProblems`) every this many steps. */
  testFreq: number;
  valProblems: number;
  learningRate: number;
  /** Linear warm-up of the learning rate over the first steps (a fresh Adam's first steps are its largest). */
  warmupSteps: number;
  /** Drop groups whose 8 rollouts all got the same reward (see the trainer's README). */
  skipZeroVarianceGroups: boolean;
  mapRewards?: RewardMapper;
  workers?: PolicyWorkers;
  /** Change the configuration before the run (experiments, e.g. `a sweep script`). */
  adjustConfig?: (config: PPOConfigInput) => PPOConfigInput;
}

export interface GrpoRun {
  result: PPOResult;
  /** Tokens of every trained row (prompt + response) over all steps. */
  trainedTokens: number;
  seconds: number;
}

/** The RL configuration (VERL names), shared by the job and the bench. */
export function grpoConfig(o: Omit<GrpoOptions, "mapRewards" | "workers" | "adjustConfig">): PPOConfigInput {
  return {
    algorithm: { adv_estimator: "grpo", skip_zero_variance_groups: o.skipZeroVarianceGroups },
    // Prompts are ~210 tokens (Qwen3's tool preamble is most of it); a whole episode's reply ~110.
    data: { train_batch_size: o.problemsPerStep, max_prompt_length: 320, max_response_length: 192 },
    actor_rollout_ref: {
      rollout: { n: o.rolloutsPerProblem, temperature: 1, val_kwargs: { n: 1, temperature: 1 } },
      actor: {
        ppo_mini_batch_size: o.problemsPerStep,
        // Two micro-batches of a step's rows: one per worker, and the same sums in one thread.
        ppo_micro_batch_size_per_gpu: Math.ceil((o.problemsPerStep * o.rolloutsPerProblem) / 2),
        clip_ratio: 0.2,
        optim: { lr: o.learningRate, lr_warmup_steps: o.warmupSteps },
      },
    },
    trainer: {
      total_training_steps: o.steps,
      test_freq: o.testFreq,
      save_freq: -1,
      val_before_train: o.testFreq > 0,
      default_local_dir: o.out,
      logger: ["console", "jsonl"],
      experiment_name: "calc-agent",
      seed: o.seed,
    },
    agentlightning: { trace_aggregator: { level: "trajectory" } },
  };
}

/** GRPO through the real stack: SQLite store, in-process runner, LLM proxy, the unchanged agent. */
export async function runGrpo(policy: PolicyBundle, splits: Splits, o: GrpoOptions): Promise<GrpoRun> {
  const t0 = performance.now();
  mkdirSync(o.out, { recursive: true });
  const store = new SqliteLightningStore(join(o.out, "store.sqlite"));
  try {
    const trainer = new Trainer({
      algorithm: new PPO<Problem>({
        config: (o.adjustConfig ?? ((c) => c))(grpoConfig(o)),
        policy,
        workers: o.workers,
        mapRewards: o.mapRewards,
        handleSignals: false,
      }),
      store,
      nRunners: 1,
      runnerConcurrency: 128,
      pollIntervalMs: 10,
      logger: consoleLogger("warn"),
    });
    const { result } = await trainer.fit<Problem, PPOResult>(calcAgent, splits.train, {
      valDataset: splits.val.slice(0, o.valProblems),
    });
    const trainedTokens = result.history.reduce((a, h) => a + (h.metrics["training/n_tokens"] ?? 0), 0);
    return { result, trainedTokens, seconds: (performance.now() - t0) / 1000 };
  } finally {
    await store.close();
  }
}

/** The shuffled-reward control: each step's rewards permuted across its rollouts (same reward mix, no link to behaviour). */
export const shuffleRewards: RewardMapper = (rewards, { rng }) => rng.shuffle([...rewards]);
