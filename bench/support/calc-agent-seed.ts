/**
 * One seed of the calc-agent controls bench (see bench/calc-agent.ts): SFT to its plateau, then four
 * arms from the same best SFT checkpoint, each evaluated on the same test problems:
 *   sft            the best SFT checkpoint itself;
 *   more_sft       SFT continued on the same demonstrations with GRPO's optimizer steps, rows per step,
 *                  learning rate and warm-up (only the objective differs);
 *   more_sft_cycle another cycle of the SFT recipe (its peak rate, linear cool-down) over as many
 *                  demonstrations;
 *   shuffled_grpo  GRPO with each step's rewards permuted across its rollouts;
 *   grpo           GRPO.
 * Writes `<out>/result.json`.
 *
 *   pnpm exec tsx bench/support/calc-agent-seed.ts --seed 1 --out /tmp/seed-1
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { type PolicyModel, selectBackend } from "@agl/trainer-gpu";
import { makeSplits } from "../../examples/calc-agent/src/dataset.js";
import {
  createPolicy,
  describeHeldOut,
  type HeldOut,
  heldOut,
  moreSft,
  runGrpo,
  type SftCurvePoint,
  sftToPlateau,
  shuffleRewards,
} from "../../examples/calc-agent/src/experiment.js";
import { MAIN_JOB } from "../../examples/calc-agent/src/settings.js";

const { values: args } = parseArgs({
  options: {
    seed: { type: "string" },
    out: { type: "string" },
  },
});
const seed = Number(args.seed);
const out = args.out!;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const t0 = performance.now();
const log = (line: string) =>
  console.log(`[seed ${seed} ${((performance.now() - t0) / 1000).toFixed(0)} s] ${line}`);

export interface ArmResult {
  test: HeldOut;
  seconds: number;
  /** GRPO arms: validation accuracy (sampled, one per problem) by step. */
  valCurve?: Array<[number, number]>;
  /** SFT sequences (more_sft) or rollouts (GRPO arms) processed. */
  sequences?: number;
}

export interface SeedResult {
  seed: number;
  sft: { bestStep: number; steps: number; seconds: number; curve: SftCurvePoint[] };
  arms: Record<"sft" | "more_sft" | "more_sft_cycle" | "shuffled_grpo" | "grpo", ArmResult>;
  seconds: number;
}

await selectBackend({ log: () => {} });
const s = MAIN_JOB;
const splits = makeSplits(s.splits, seed);
const policy = createPolicy(splits, seed);
const testSeed = seed * 31 + 5;

const warm = await sftToPlateau(policy, splits, { ...s.sft, seed, log });
const best = policy.model.clone({ trainable: false }) as PolicyModel;
const arms = {} as SeedResult["arms"];
let t = performance.now();
arms.sft = { test: await heldOut(policy, splits.test, testSeed), seconds: 0 };
log(`best SFT (step ${warm.bestStep}): ${describeHeldOut(arms.sft.test)}`);

for (const arm of ["grpo", "shuffled_grpo"] as const) {
  policy.model.setWeightsFrom(best);
  t = performance.now();
  const run = await runGrpo(policy, splits, {
    ...s.grpo,
    seed,
    out: join(out, arm),
    mapRewards: arm === "shuffled_grpo" ? shuffleRewards : undefined,
  });
  const valCurve = run.result.history
    .filter((h) => h.metrics["val/accuracy"] !== undefined)
    .map((h) => [h.step, h.metrics["val/accuracy"]!] as [number, number]);
  const seconds = (performance.now() - t) / 1000;
  const sequences = run.result.history.reduce((a, h) => a + (h.metrics["training/n_rollouts"] ?? 0), 0);
  arms[arm] = { test: await heldOut(policy, splits.test, testSeed), seconds, valCurve, sequences };
  log(`${arm}: ${describeHeldOut(arms[arm].test)}`);
}

// Both more-SFT controls process as many demonstrations (forward and backward) as GRPO samples rollouts.
const rowsPerStep = s.grpo.problemsPerStep * s.grpo.rolloutsPerProblem;
const rollouts = s.grpo.steps * rowsPerStep;
const plans = {
  more_sft: {
    steps: s.grpo.steps,
    batchSize: rowsPerStep,
    learningRate: s.grpo.learningRate,
    warmupSteps: s.grpo.warmupSteps,
    schedule: "constant",
  },
  more_sft_cycle: {
    steps: Math.ceil(rollouts / s.sft.batchSize),
    batchSize: s.sft.batchSize,
    learningRate: s.sft.learningRate,
    warmupSteps: 10,
    schedule: "linear",
  },
} as const;
for (const arm of ["more_sft", "more_sft_cycle"] as const) {
  policy.model.setWeightsFrom(best);
  t = performance.now();
  const extra = await moreSft(policy, warm.demos, plans[arm], { ...s.sft, seed, log });
  arms[arm] = {
    test: await heldOut(policy, splits.test, testSeed),
    seconds: (performance.now() - t) / 1000,
    sequences: extra.sequences,
  };
  log(`${arm} (${extra.steps} steps): ${describeHeldOut(arms[arm].test)}`);
}

const result: SeedResult = {
  seed,
  sft: { bestStep: warm.bestStep, steps: warm.steps, seconds: warm.seconds, curve: warm.curve },
  arms,
  seconds: (performance.now() - t0) / 1000,
};
writeFileSync(join(out, "result.json"), `${JSON.stringify(result, null, 2)}\n`);
log("done");
