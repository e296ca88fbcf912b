/**
 * The job's settings, also what the bench (bench/calc-agent-qwen3.ts) runs: one place, so the bench
 * measures exactly the job the README's first command runs. Sized for two CPU cores: every sequence
 * carries Qwen3's ~150-token tool preamble, so a training row is ~260 tokens.
 */
export const MAIN_JOB = {
  splits: { train: 2000, demo: 4000, val: 100, test: 200 },
  /** SFT (full fine-tuning from the fresh checkpoint) on imperfect demonstrations to its plateau. */
  sft: {
    /** Share of demonstrations that do the second step with the calculator (the rest in the head). */
    chainShare: 0.25,
    /** Steps on rows without the tool preamble first (`sftToPlateau`); 0 in the recorded runs. */
    shortSteps: 0,
    evalEvery: 40,
    patience: 2,
    maxSteps: 160,
    coolDownSteps: 40,
    batchSize: 32,
    microBatchSize: 16,
    learningRate: 3e-3,
    /** Validation: the first N validation problems (greedy + one sample each) and loss on their demos. */
    valProblems: 50,
    valLossExamples: 32,
  },
  /**
   * SFT from a pretrained base (`--base`, e.g. the committed `base/`) differs in two settings (session 8 of
   * the README): a higher rate and a longer phase, since the second operand (the question's third number,
   * copied after the first tool result) is learnt only between steps 200 and 360 and sampled validation
   * success appears with it.
   */
  sftFromBase: { learningRate: 6e-3, maxSteps: 360 },
  /** GRPO with LoRA adapters on the best SFT checkpoint (base frozen, as a user would tune a Qwen). */
  grpo: {
    steps: 16,
    problemsPerStep: 8,
    rolloutsPerProblem: 8,
    testFreq: 8,
    valProblems: 50,
    learningRate: 2e-3,
    warmupSteps: 3,
    skipZeroVarianceGroups: true,
    lora: { rank: 8, alpha: 16 },
  },
} as const;

/** The SFT settings of the job: `MAIN_JOB.sft`, with `MAIN_JOB.sftFromBase` on top when it starts from a base. */
export const sftSettings = (fromBase: boolean) => ({
  ...MAIN_JOB.sft,
  ...(fromBase ? MAIN_JOB.sftFromBase : {}),
});
