/**
 * One seed of the calc-agent bench (see bench/calc-agent-qwen3.ts): SFT to its plateau (best checkpoint chosen on
 * the validation split), exported as a Hugging Face folder; then, each from that same checkpoint and
 * scored on the same test problems:
 *   sft            the best SFT checkpoint itself (sampled with 8 per problem: pass@1 and pass@8);
 *   forced_tool    (a) the same policy with `tool_choice: "required"` on the first two turns (PolicyServer
 *                  forces the call's opening; the model writes the arguments), "auto" on the last;
 *   rft            (b) rejection-sampling fine-tuning with GRPO's sampling and optimizer budget;
 *   more_sft       (c) SFT continued on the demonstrations with GRPO's optimizer steps, rows, rate, warm-up;
 *   shuffled_grpo  (d) GRPO with each step's rewards permuted across its rollouts;
 *   grpo           the job's GRPO;
 *   grpo_full      GRPO with full fine-tuning (every weight, no adapters) at `--full-lr` (not run by default).
 * The other four trained arms train the same LoRA adapters (rank, alpha, seed) on the frozen SFT weights.
 * Writes `<out>/result.json`.
 *
 *   pnpm exec tsx bench/support/calc-agent-qwen3-seed.ts --seed 1 --out /tmp/seed-1 [--workers 2] [--score val]
 *     [--base examples/calc-agent-qwen3/base] [--sft-from <job out>/sft-best] [--arms grpo,rft,...] [--full-lr 1.5e-3]
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  exportPretrained,
  loadPretrainedPolicy,
  type PolicyWorkers,
  type PretrainedPolicy,
  selectBackend,
  startPolicyWorkers,
} from "@agl/trainer-gpu";
import { demonstrations, makeSplits } from "../../examples/calc-agent-qwen3/src/dataset.js";
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
} from "../../examples/calc-agent-qwen3/src/experiment.js";
import { rejectionSamplingFineTune } from "../../examples/calc-agent-qwen3/src/rft.js";
import { MAIN_JOB, sftSettings } from "../../examples/calc-agent-qwen3/src/settings.js";

const { values: args } = parseArgs({
  options: {
    seed: { type: "string" },
    out: { type: "string" },
    score: { type: "string", default: "test" },
    workers: { type: "string", default: "2" },
    arms: { type: "string", default: "forced_tool,grpo,rft,more_sft,shuffled_grpo" },
    /** Start from this pretrained checkpoint folder (the job's `--base`) instead of a fresh checkpoint. */
    base: { type: "string" },
    /**
     * Skip SFT: take this folder (e.g. a job run's `<out>/sft-best`, same seed and settings) as the best SFT
     * checkpoint, so the arms can run beside a job that already paid for the SFT.
     */
    "sft-from": { type: "string" },
    /** Adam rate of the grpo_full arm; the default was chosen on validation (bench/results/calc-agent-qwen3-base-baselines.md). */
    "full-lr": { type: "string", default: "1.5e-3" },
  },
});
const seed = Number(args.seed);
const out = args.out!;
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
const t0 = performance.now();
const loadAverageAtStart = loadavg()[0]!;
const log = (line: string) =>
  console.log(`[seed ${seed} ${((performance.now() - t0) / 1000).toFixed(0)} s] ${line}`);

export type Arm = "sft" | "forced_tool" | "rft" | "more_sft" | "shuffled_grpo" | "grpo" | "grpo_full";

export interface ArmResult {
  test: HeldOut;
  seconds: number;
  /** pass@8 (sft only): share of problems solved by at least one of 8 samples. */
  passAt8?: number;
  /** GRPO arms: validation accuracy (sampled, one per problem) by step. */
  valCurve?: Array<[number, number]>;
  /** Episodes sampled (GRPO arms, RFT) or demonstrations trained on (more_sft). */
  sequences?: number;
  /** RFT: rewarded episodes trained on. */
  kept?: number;
  /** grpo_full: its Adam rate. */
  learningRate?: number;
}

export interface SeedResult {
  seed: number;
  score: "test" | "val";
  sft: { bestStep: number; steps: number; seconds: number; curve: SftCurvePoint[] };
  arms: Partial<Record<Arm, ArmResult>>;
  seconds: number;
  loadAverageAtStart: number;
}

await selectBackend({ log: () => {} });
const s = MAIN_JOB;
const splits = makeSplits(s.splits, seed);
if (args.score !== "test" && args.score !== "val") throw new Error("--score must be test or val");
const scored = args.score === "val" ? splits.val : splits.test;
const testSeed = seed * 31 + 5;
const nWorkers = Number(args.workers);
const withWorkers = async <T>(policy: PretrainedPolicy, fn: (w?: PolicyWorkers) => Promise<T>) => {
  const workers = nWorkers > 0 ? await startPolicyWorkers(policy, { workers: nWorkers }) : undefined;
  try {
    return await fn(workers);
  } finally {
    await workers?.close();
  }
};

const arms: SeedResult["arms"] = {};
let sftSummary: SeedResult["sft"] | undefined;
/** result.json after every arm, so a run stopped early still leaves what it measured. */
const save = () =>
  writeFileSync(
    join(out, "result.json"),
    `${JSON.stringify({ seed, score: args.score, sft: sftSummary, arms, seconds: (performance.now() - t0) / 1000, loadAverageAtStart }, null, 2)}\n`,
  );
// A set, not a substring test on the string: "shuffled_grpo" contains "grpo".
const armsToRun = new Set(args.arms!.split(",").map((a) => a.trim()));
const sftFrom = args["sft-from"];
const initial = sftFrom
  ? await loadPretrainedPolicy(sftFrom)
  : await createPolicy(join(out, "initial"), seed, args.base);
const sftDir = join(out, "sft-best");
const warm = await withWorkers(initial, async (workers) => {
  const w = sftFrom
    ? {
        demos: demonstrations(splits.demo, s.sft.chainShare, seed),
        bestStep: -1,
        steps: 0,
        seconds: 0,
        curve: [],
      }
    : await sftToPlateau(initial, splits, { ...sftSettings(args.base !== undefined), workers, seed, log });
  const test = await heldOut(initial, scored, testSeed, workers, { samples: 8 });
  const n = scored.length;
  const passAt8 =
    scored.filter((_, i) =>
      Array.from({ length: 8 }, (_, k) => test.sampled.correct[k * n + i]).some(Boolean),
    ).length / n;
  arms.sft = { test, seconds: 0, passAt8 };
  log(`best SFT (step ${w.bestStep}): ${describeHeldOut(test)}, pass@8 ${(100 * passAt8).toFixed(1)}%`);
  if (armsToRun.has("forced_tool")) {
    arms.forced_tool = {
      test: await heldOut(initial, scored, testSeed, workers, { requireToolTurns: 2 }),
      seconds: 0,
    };
    log(`forced_tool: ${describeHeldOut(arms.forced_tool.test)}`);
  }
  return w;
});
sftSummary = { bestStep: warm.bestStep, steps: warm.steps, seconds: warm.seconds, curve: warm.curve };
save();
await exportPretrained(initial.model, sftDir);
initial.model.dispose();

const g = s.grpo;
const rowsPerStep = g.problemsPerStep * g.rolloutsPerProblem;
const fullLr = Number(args["full-lr"]);
if (!(fullLr > 0)) throw new Error(`--full-lr must be a positive number, got "${args["full-lr"]}"`);
for (const arm of ["grpo", "rft", "more_sft", "shuffled_grpo", "grpo_full"] as const) {
  if (!armsToRun.has(arm)) continue;
  const policy = await loadPretrainedPolicy(sftDir, arm === "grpo_full" ? {} : { lora: { ...g.lora, seed } });
  const t = performance.now();
  const result = await withWorkers(policy, async (workers): Promise<ArmResult> => {
    let extra: Partial<ArmResult> = {};
    if (arm === "grpo" || arm === "shuffled_grpo" || arm === "grpo_full") {
      const learningRate = arm === "grpo_full" ? fullLr : g.learningRate;
      const run = await runGrpo(policy, splits, {
        ...g,
        learningRate,
        seed,
        workers,
        out: join(out, arm),
        mapRewards: arm === "shuffled_grpo" ? shuffleRewards : undefined,
      });
      extra = {
        valCurve: run.result.history
          .filter((h) => h.metrics["val/accuracy"] !== undefined)
          .map((h) => [h.step, h.metrics["val/accuracy"]!] as [number, number]),
        sequences: run.result.history.reduce((a, h) => a + (h.metrics["training/n_rollouts"] ?? 0), 0),
        ...(arm === "grpo_full" ? { learningRate } : {}),
      };
    } else if (arm === "rft") {
      const r = await rejectionSamplingFineTune(policy, splits.train, {
        ...g,
        microBatchSize: s.sft.microBatchSize,
        seed,
        workers,
        log,
      });
      extra = { sequences: r.sampled, kept: r.kept };
    } else {
      const plan = {
        steps: g.steps,
        batchSize: rowsPerStep,
        learningRate: g.learningRate,
        warmupSteps: g.warmupSteps,
        schedule: "constant",
      } as const;
      const r = await moreSft(policy, warm.demos, plan, { ...s.sft, workers, seed, log });
      extra = { sequences: r.sequences };
    }
    const test = await heldOut(policy, scored, testSeed, workers);
    return { test, seconds: (performance.now() - t) / 1000, ...extra };
  });
  arms[arm] = result;
  save();
  log(`${arm}: ${describeHeldOut(result.test)}`);
  policy.model.dispose();
}

save();
log("done");
