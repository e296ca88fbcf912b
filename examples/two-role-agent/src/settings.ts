/**
 * The example's settings, also what the bench (bench/two-role.ts) runs, chosen on the validation split.
 * Sized for two loaded CPU cores: a call is ~30 tokens, an episode two or three calls.
 */
export const SETTINGS = {
  /** Format-only warm-up, full fine-tuning, the same for both arms (see `demonstrations`). */
  warmup: {
    demos: 4000,
    writerSkill: 0.75,
    checkerSkill: 0.75,
    steps: 200,
    batchSize: 32,
    learningRate: 3e-3,
  },
  /** GRPO on LoRA adapters over the frozen warm-up weights. */
  grpo: {
    steps: 16,
    problemsPerStep: 8,
    rolloutsPerProblem: 8,
    learningRate: 5e-3,
    /** An adapter per role gets `rank`; the one shared adapter `2 * rank`: the same trainable parameters. */
    rank: 4,
    /** LoRA alpha / rank, the same in both arms. */
    scale: 2,
  },
  /** Held-out scoring: greedy, and sampled at temperature 1. */
  evalSamples: 1,
} as const;
