/**
 * The main job's settings, also what the controls bench (bench/calc-agent.ts) runs: one place, so the
 * bench measures exactly the job the README's first command runs.
 */
export const MAIN_JOB = {
  splits: { train: 2000, demo: 4000, val: 100, test: 200 },
  /** SFT on imperfect demonstrations to its plateau (see `sftToPlateau`). */
  sft: {
    /**
     * Share of demonstrations that use the calculator; the rest answer in the head ("I think 37+48 = 85.").
     * Rare enough that the greedy policy never picks the tool (at 0.3 its greedy choice sat near a tie that
     * noise flipped); chosen on the validation split (bench/results/calc-agent-tool-share.md).
     */
    toolShare: 0.15,
    evalEvery: 50,
    patience: 3,
    maxSteps: 600,
    coolDownSteps: 100,
    batchSize: 64,
    microBatchSize: 32,
    learningRate: 3e-3,
  },
  /**
   * GRPO: a fixed number of steps of `problemsPerStep` x `rolloutsPerProblem` rollouts; validation every
   * `testFreq` steps draws the curve. The rate is low and warmed up: at 1e-3, or without the warm-up, the
   * updates' noise alone (measured with shuffled rewards) wrecks the policy within 10-30 steps.
   */
  grpo: {
    steps: 40,
    problemsPerStep: 16,
    rolloutsPerProblem: 8,
    testFreq: 10,
    learningRate: 2e-4,
    warmupSteps: 5,
    skipZeroVarianceGroups: true,
  },
} as const;
