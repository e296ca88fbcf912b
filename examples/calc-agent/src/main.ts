/**
 * calc-agent: train a tiny tool-using agent end to end on this machine, and measure what RL adds.
 *
 *   1. generate arithmetic word problems: RL prompts, demonstration problems, a validation split (picks the
 *      best SFT checkpoint, draws the RL curve) and a test split (the final numbers, never used to choose);
 *   2. SFT a fresh 2-layer transformer on imperfect demonstrations (most answer outright, a few use the
 *      calculator) until validation accuracy stops improving; keep the best checkpoint;
 *   3. GRPO from that checkpoint for a fixed number of steps with the PPO algorithm on the core Trainer:
 *      SQLite store, in-process runners, the policy served behind the LLM proxy, the agent unchanged
 *      (`openai` SDK + its own calculator tool);
 *   4. print test accuracy (greedy and sampled) of the best SFT checkpoint and after GRPO, and the time.
 */
import { mkdirSync, rmSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  loadLatestPPOCheckpoint,
  type PolicyWorkers,
  selectBackend,
  startPolicyWorkers,
} from "@agl/trainer-gpu";
import { freshProblems, makeSplits, type Splits } from "./dataset.js";
import type { EvalResult } from "./evaluate.js";
import {
  createPolicy,
  describeHeldOut,
  type HeldOut,
  heldOut,
  pct,
  runGrpo,
  sftToPlateau,
} from "./experiment.js";
import { loadWarmStart, rlSecondsSoFar, saveWarmStart, WARM_START_FILE } from "./resume-state.js";
import { MAIN_JOB } from "./settings.js";

// `pnpm start -- --steps 5` hands the script a literal "--" first.
const argv = process.argv.slice(2);
if (argv[0] === "--") argv.shift();
const { values: args } = parseArgs({
  args: argv,
  options: {
    out: { type: "string", default: "calc-agent-run" },
    /** GRPO steps (a fixed amount of work: the run never stops on the clock). */
    steps: { type: "string", default: String(MAIN_JOB.grpo.steps) },
    /** SFT: share of demonstrations that use the calculator; the rest answer outright. */
    "tool-share": { type: "string", default: String(MAIN_JOB.sft.toolShare) },
    /** SFT: validate every N steps; stop after `patience` validations without improvement, or at `sft-max-steps`. */
    "sft-eval-every": { type: "string", default: String(MAIN_JOB.sft.evalEvery) },
    "sft-patience": { type: "string", default: String(MAIN_JOB.sft.patience) },
    "sft-max-steps": { type: "string", default: String(MAIN_JOB.sft.maxSteps) },
    /**
     * Worker threads for generation and gradients; 0 = all in this thread. Any count gives the same SFT;
     * GRPO's micro-batches are split per worker above 2, so the recorded numbers are for 0-2 workers.
     */
    workers: { type: "string", default: "2" },
    seed: { type: "string", default: "1" },
    /** Also score both rows on 200 problems drawn from this seed, outside every split (off by default). */
    "fresh-test-seed": { type: "string" },
    resume: { type: "boolean", default: false },
  },
});

const seed = Number(args.seed);
const out = resolve(args.out!);
const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`${line} (${elapsed()})`);

async function main(): Promise<void> {
  if (!args.resume) rmSync(out, { recursive: true, force: true });
  await selectBackend();
  const splits = makeSplits(MAIN_JOB.splits, seed);
  const policy = createPolicy(splits, seed);
  const nWorkers = Number(args.workers);
  const workers = nWorkers > 0 ? await startPolicyWorkers(policy, { workers: nWorkers }) : undefined;
  try {
    await run(policy, splits, workers);
  } finally {
    await workers?.close();
  }
}

async function run(
  policy: ReturnType<typeof createPolicy>,
  splits: Splits,
  workers: PolicyWorkers | undefined,
) {
  console.log(
    `[calc-agent] policy: ${policy.model.parameterCount.toLocaleString()} parameters, vocabulary ${policy.tokenizer.vocabSize}; ${args.steps} GRPO steps; ${workers ? `${workers.size} worker threads` : "one thread"}`,
  );

  const fresh =
    args["fresh-test-seed"] !== undefined
      ? freshProblems(splits, 200, Number(args["fresh-test-seed"]))
      : undefined;
  let freshBefore: HeldOut | undefined;
  let spentBefore = 0;
  let before: HeldOut;
  if (args.resume) {
    const ckpt = await loadLatestPPOCheckpoint(out);
    const saved = loadWarmStart(out, seed);
    if (!ckpt || !saved) throw new Error(`--resume: ${out} holds no checkpoint and ${WARM_START_FILE}`);
    // PPO restores the checkpoint itself; the "before" row is what was measured after SFT.
    before = saved;
    spentBefore = saved.seconds + rlSecondsSoFar(ckpt.state.history);
    console.log(
      `[calc-agent] resuming ${ckpt.dir} (step ${ckpt.state.step}); best SFT from ${WARM_START_FILE}`,
    );
  } else {
    const warm = await sftToPlateau(policy, splits, {
      toolShare: Number(args["tool-share"]),
      evalEvery: Number(args["sft-eval-every"]),
      patience: Number(args["sft-patience"]),
      maxSteps: Number(args["sft-max-steps"]),
      coolDownSteps: MAIN_JOB.sft.coolDownSteps,
      batchSize: MAIN_JOB.sft.batchSize,
      microBatchSize: MAIN_JOB.sft.microBatchSize,
      learningRate: MAIN_JOB.sft.learningRate,
      workers,
      seed,
      log,
    });
    log(`[calc-agent] best SFT checkpoint: step ${warm.bestStep} of ${warm.steps}`);
    before = await heldOut(policy, splits.test, seed * 31 + 5, workers);
    if (fresh) freshBefore = await heldOut(policy, fresh, seed * 31 + 7, workers);
    log(`[calc-agent] best SFT on the test split: ${describeHeldOut(before)}`);
    mkdirSync(out, { recursive: true });
    saveWarmStart(out, { seed, seconds: (performance.now() - t0) / 1000, ...before });
  }

  const grpo = await runGrpo(policy, splits, {
    ...MAIN_JOB.grpo,
    steps: Number(args.steps),
    workers,
    seed,
    out,
  });
  const after = await heldOut(policy, splits.test, seed * 31 + 5, workers);
  const freshAfter = fresh ? await heldOut(policy, fresh, seed * 31 + 7, workers) : undefined;
  const { result } = grpo;

  const gain = (a: EvalResult, b: EvalResult) => `${((b.accuracy - a.accuracy) * 100).toFixed(1)} points`;
  console.log("");
  console.log(
    `[calc-agent] test accuracy (${splits.test.length} held-out problems, never used for choices):`,
  );
  console.log("                    greedy                      sampled (T=1, 2 per problem)");
  const row = (label: string, r: HeldOut) =>
    console.log(
      `  ${label.padEnd(16)}  ${`${pct(r.greedy.accuracy)} (tool use ${pct(r.greedy.toolUse)})`.padEnd(27)} ${pct(r.sampled.accuracy)} (tool use ${pct(r.sampled.toolUse)})`,
    );
  row("best SFT", before);
  row("after GRPO", after);
  console.log(
    `  improvement       ${gain(before.greedy, after.greedy).padEnd(27)} ${gain(before.sampled, after.sampled)}   (${result.stepsCompleted} GRPO steps)`,
  );
  if (fresh && freshBefore && freshAfter) {
    console.log(
      `[calc-agent] on ${fresh.length} fresh problems (seed ${args["fresh-test-seed"]}, outside every split):`,
    );
    row("best SFT", freshBefore);
    row("after GRPO", freshAfter);
  }
  console.log(`[calc-agent] plot: ${result.plotPath}`);
  console.log(`[calc-agent] metrics: ${result.metricsPath}`);
  console.log(`[calc-agent] checkpoint: ${result.checkpointDir}`);
  const overall =
    spentBefore > 0
      ? `; ${(spentBefore + (performance.now() - t0) / 1000).toFixed(1)} s with the resumed run`
      : "";
  console.log(`[calc-agent] total time ${elapsed()}${overall}${result.aborted ? " (interrupted)" : ""}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
