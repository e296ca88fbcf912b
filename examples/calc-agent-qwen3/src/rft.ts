import {
  type PolicyBundle,
  type PolicyWorkers,
  SeededRandom,
  type SftExample,
  sft,
  type tf,
} from "@agl/trainer-gpu";
import { CALCULATOR_TOOL, type Problem } from "./dataset.js";
import { runEpisodes } from "./evaluate.js";

/**
 * Rejection-sampling fine-tuning, the supervised baseline that uses the reward: every step samples
 * exactly what a GRPO step samples (`problemsPerStep` training problems x `rolloutsPerProblem` episodes
 * from the current policy at temperature 1), keeps the rewarded episodes and takes one optimizer step of
 * SFT on them, with GRPO's optimizer (Adam), rate and warm-up. Same sampling and optimizer budget as GRPO;
 * only the use of the reward differs (imitate successes vs. push up better-than-the-group episodes and
 * push down worse ones).
 */

export interface RftOptions {
  steps: number;
  problemsPerStep: number;
  rolloutsPerProblem: number;
  learningRate: number;
  warmupSteps: number;
  microBatchSize: number;
  seed: number;
  workers?: PolicyWorkers;
  log: (line: string) => void;
}

export async function rejectionSamplingFineTune(
  policy: PolicyBundle,
  train: readonly Problem[],
  o: RftOptions,
): Promise<{ sampled: number; kept: number; optimizerSteps: number; seconds: number }> {
  const t0 = performance.now();
  const order = new SeededRandom(o.seed).shuffle([...train]);
  let optimizer: tf.Optimizer | undefined;
  let sampled = 0;
  let kept = 0;
  let optimizerSteps = 0;
  for (let step = 0; step < o.steps; step++) {
    const problems = Array.from(
      { length: o.problemsPerStep },
      (_, i) => order[(step * o.problemsPerStep + i) % order.length]!,
    );
    const episodes = problems.flatMap((p) => Array.from({ length: o.rolloutsPerProblem }, () => p));
    const { attempts } = await runEpisodes(policy, episodes, {
      temperature: 1,
      seed: o.seed * 10_000 + step,
      serve: o.workers?.serve,
    });
    const good = attempts
      .filter((a) => a.correct)
      .map((a) => ({ messages: a.messages, tools: [CALCULATOR_TOOL] }) as unknown as SftExample);
    sampled += episodes.length;
    kept += good.length;
    const lr = o.learningRate * Math.min(1, (step + 1) / Math.max(1, o.warmupSteps));
    if (good.length > 0) {
      if (optimizer) (optimizer as unknown as { learningRate: number }).learningRate = lr;
      const res = await sft(policy.model, good, {
        template: policy.template,
        steps: 1,
        batchSize: good.length,
        microBatchSize: o.microBatchSize,
        workers: o.workers,
        learningRate: lr,
        optimizer,
        seed: o.seed * 1000 + step,
        progress: false,
      });
      optimizer = res.optimizer;
      optimizerSteps += 1;
    }
    o.log(`[calc-agent] RFT step ${step + 1}: ${good.length} of ${episodes.length} episodes rewarded`);
  }
  optimizer?.dispose();
  return { sampled, kept, optimizerSteps, seconds: (performance.now() - t0) / 1000 };
}
