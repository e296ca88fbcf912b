/**
 * The main job's settings, also what the controls bench (bench/calc-agent.ts) runs: one place, so the
 * bench measures exactly the job the README's first command runs.
 */
export const MAIN_JOB = {
  splits: { train: 2000, demo: 1200, val: 100, test: 200 },
  /** SFT on imperfect demonstrations until validation accuracy stops improving. */
  sft: {
    /** Share of demonstrations that use the calculator; the rest answer outright ("It is 85."). */
    toolShare: 0.4,
    evalEvery: 50,
    patience: 4,
    maxSteps: 1000,
    batchSize: 32,
    learningRate: 4e-3,
  },
  /** Continued SFT (the "more SFT" control). */
  sftSettings: { batchSize: 32, learningRate: 4e-3 },
  /** GRPO: a fixed number of steps; validation every `testFreq` steps draws the curve. */
  grpo: { steps: 40, testFreq: 10 },
} as const;
