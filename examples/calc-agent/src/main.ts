/**
 * calc-agent: train a tiny tool-using agent end to end on this machine.
 *
 *   1. generate arithmetic word problems (train / demonstration / held-out validation splits);
 *   2. a short, weak SFT warm start of a fresh 2-layer transformer on imperfect demonstrations: enough
 *      for sampled tool calls to work, then a few steps that leave it preferring to guess (see warmStart);
 *   3. GRPO with the PPO algorithm on the core Trainer: SQLite store, in-process runners, the policy
 *      served behind the LLM proxy, the agent unchanged (`openai` SDK + its own calculator tool);
 *   4. stop RL when the time budget runs out; print held-out accuracy (greedy and sampled) before and
 *      after, where the plot and metrics are, and the time taken.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { consoleLogger, Trainer } from "@agl/core";
import { SqliteLightningStore } from "@agl/store";
import {
  ChatTemplate,
  loadLatestPPOCheckpoint,
  type PolicyBundle,
  PolicyModel,
  PPO,
  type PPOConfigInput,
  type PPOResult,
  type SftExample,
  selectBackend,
  sft,
  Tokenizer,
} from "@agl/trainer-gpu";
import { calcAgent } from "./agent.js";
import { alphabet, demonstrations, makeSplits, type Problem } from "./dataset.js";
import { type EvalResult, evaluatePolicy } from "./evaluate.js";
import { loadWarmStart, rlSecondsSoFar, saveWarmStart, WARM_START_FILE } from "./resume-state.js";

// `pnpm start -- --steps 5` hands the script a literal "--" first.
const argv = process.argv.slice(2);
if (argv[0] === "--") argv.shift();
const { values: args } = parseArgs({
  args: argv,
  options: {
    out: { type: "string", default: "calc-agent-run" },
    /** RL steps at most; the time budget usually ends RL first. */
    steps: { type: "string", default: "80" },
    /** Wall-clock budget for the whole run (warm start, RL and the final evaluation), in minutes. */
    "budget-min": { type: "string", default: "13" },
    /** Warm start: SFT steps per round while learning the tool format, and the share of tool demos then. */
    "sft-steps": { type: "string", default: "100" },
    "tool-share": { type: "string", default: "0.8" },
    /** Warm start, last round: steps on demos that mostly guess, so the policy starts out preferring to guess. */
    "guess-steps": { type: "string", default: "40" },
    "guess-tool-share": { type: "string", default: "0.2" },
    seed: { type: "string", default: "1" },
    resume: { type: "boolean", default: false },
  },
});

const seed = Number(args.seed);
const out = resolve(args.out!);
const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;

async function main(): Promise<void> {
  if (!args.resume) rmSync(out, { recursive: true, force: true });
  await selectBackend();
  const budgetSeconds = Number(args["budget-min"]) * 60;
  const splits = makeSplits({ train: 2000, demo: 1200, val: 100 }, seed);
  const tokenizer = new Tokenizer({ chars: alphabet([...splits.train, ...splits.demo, ...splits.val]) });
  const template = new ChatTemplate(tokenizer);
  const model = PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 64,
    nLayers: 2,
    nHeads: 4,
    contextLength: 160,
    seed,
  });
  const policy = { model, tokenizer, template };
  console.log(
    `[calc-agent] policy: ${model.parameterCount.toLocaleString()} parameters, vocabulary ${tokenizer.vocabSize}; budget ${budgetSeconds / 60} min`,
  );

  // Seconds of the budget spent by the interrupted run(s) this one resumes: the budget covers the whole
  // run, so a resumed run gets only what is left of it.
  let spentBefore = 0;
  let baselineLabel = "after warm start";
  let warm: { greedy: EvalResult; sampled: EvalResult };
  // The final evaluation costs about as much as the warm-start one; RL must leave room for it.
  let evalSeconds: number;
  if (args.resume) {
    const ckpt = await loadLatestPPOCheckpoint(out);
    if (!ckpt) throw new Error(`--resume: no checkpoint in ${out}`);
    const rlSeconds = rlSecondsSoFar(ckpt.state.history);
    const saved = loadWarmStart(out, seed);
    if (saved) {
      // PPO restores the checkpoint itself; the baseline is what was measured after the warm start.
      warm = saved;
      evalSeconds = saved.evalSeconds;
      spentBefore = saved.seconds + rlSeconds;
      console.log(
        `[calc-agent] resuming ${ckpt.dir} (step ${ckpt.state.step}); warm-start accuracy from ${WARM_START_FILE};` +
          ` ${spentBefore.toFixed(0)} s of the budget already spent (warm start ${saved.seconds.toFixed(0)} s, RL ${rlSeconds.toFixed(0)} s)`,
      );
    } else {
      // A run directory without the record (written by an older version): no warm-start numbers exist
      // any more, so the baseline is the resumed checkpoint itself, and says so.
      await ckpt.restoreInto(model, null);
      const tEval = performance.now();
      warm = await heldOut(policy, splits.val);
      evalSeconds = (performance.now() - tEval) / 1000;
      spentBefore = rlSeconds;
      baselineLabel = "at resume";
      console.log(
        `[calc-agent] no ${WARM_START_FILE} in ${out}: the "before" row is the checkpoint at step ${ckpt.state.step}, not the warm start;` +
          ` the budget counts the ${rlSeconds.toFixed(0)} s of RL already done (the warm start's time is unknown)`,
      );
    }
  } else {
    await warmStart(policy, splits.demo, splits.train);
    const tEval = performance.now();
    warm = await heldOut(policy, splits.val);
    evalSeconds = (performance.now() - tEval) / 1000;
    mkdirSync(out, { recursive: true });
    saveWarmStart(out, { seed, seconds: (performance.now() - t0) / 1000, evalSeconds, ...warm });
  }
  console.log(
    `[calc-agent] ${baselineLabel} (${elapsed()}): held-out greedy ${pct(warm.greedy.accuracy)} (tool use ${pct(warm.greedy.toolUse)}),` +
      ` sampled ${pct(warm.sampled.accuracy)} (tool use ${pct(warm.sampled.toolUse)})`,
  );

  const config: PPOConfigInput = {
    algorithm: { adv_estimator: "grpo" },
    data: { train_batch_size: 16, max_prompt_length: 128, max_response_length: 96 },
    actor_rollout_ref: {
      // The curve in the plot: held-out accuracy of the sampled policy (temperature 1), what RL optimises.
      rollout: { n: 8, temperature: 1, val_kwargs: { n: 1, temperature: 1 } },
      actor: {
        ppo_mini_batch_size: 16,
        ppo_micro_batch_size_per_gpu: 128,
        clip_ratio: 0.2,
        optim: { lr: 5e-4 },
      },
    },
    trainer: {
      total_training_steps: Number(args.steps),
      test_freq: 5,
      save_freq: 20,
      val_before_train: true,
      default_local_dir: out,
      logger: ["console", "jsonl", "progress"],
      experiment_name: "calc-agent",
      seed,
    },
    agentlightning: { trace_aggregator: { level: "trajectory" } },
  };
  mkdirSync(out, { recursive: true });
  const store = new SqliteLightningStore(join(out, "store.sqlite"));
  let slowestStep = 0;
  let outOfTime = false;
  const ppoOptions: ConstructorParameters<typeof PPO<Problem>>[0] = {
    config,
    policy,
    // Stop between steps when another step (plus a periodic validation) and the final evaluation would
    // not fit in the budget; PPO reads `stopAfterStep` after every step and checkpoints on the way out.
    onStep: (step, metrics) => {
      slowestStep = Math.max(slowestStep, metrics["timing_s/step"] ?? 0);
      const left = budgetSeconds - spentBefore - (performance.now() - t0) / 1000;
      if (left < 1.5 * slowestStep + evalSeconds + 5) {
        outOfTime = true;
        ppoOptions.stopAfterStep = step;
      }
    },
  };
  const trainer = new Trainer({
    algorithm: new PPO<Problem>(ppoOptions),
    store,
    nRunners: 1,
    runnerConcurrency: 128,
    pollIntervalMs: 10,
    logger: consoleLogger("warn"),
  });
  const { result } = await trainer.fit<Problem, PPOResult>(calcAgent, splits.train, {
    valDataset: splits.val,
  });
  await store.close();

  const final = await heldOut(policy, splits.val);
  const gain = (a: EvalResult, b: EvalResult) => `${((b.accuracy - a.accuracy) * 100).toFixed(1)} points`;
  console.log("");
  console.log(`[calc-agent] held-out validation accuracy (${splits.val.length} problems):`);
  console.log("                    greedy                      sampled (T=1, 2 per problem)");
  const row = (label: string, r: { greedy: EvalResult; sampled: EvalResult }) =>
    console.log(
      `  ${label.padEnd(16)}  ${`${pct(r.greedy.accuracy)} (tool use ${pct(r.greedy.toolUse)})`.padEnd(27)} ${pct(r.sampled.accuracy)} (tool use ${pct(r.sampled.toolUse)})`,
    );
  row(baselineLabel, warm);
  row("after GRPO", final);
  console.log(
    `  improvement       ${gain(warm.greedy, final.greedy).padEnd(27)} ${gain(warm.sampled, final.sampled)}   (${result.stepsCompleted} RL steps)`,
  );
  console.log(`[calc-agent] plot: ${result.plotPath}`);
  console.log(`[calc-agent] metrics: ${result.metricsPath}`);
  console.log(`[calc-agent] checkpoint: ${result.checkpointDir}`);
  const note = result.aborted ? " (interrupted)" : outOfTime ? " (RL stopped by the time budget)" : "";
  const overall =
    spentBefore > 0
      ? `; ${(spentBefore + (performance.now() - t0) / 1000).toFixed(1)} s with the resumed run`
      : "";
  console.log(`[calc-agent] total time ${elapsed()}${overall}${note}`);
}

/** Greedy accuracy, and sampled accuracy (temperature 1, two samples per problem), on held-out problems. */
async function heldOut(policy: PolicyBundle, problems: readonly Problem[]) {
  const greedy = await evaluatePolicy(policy, problems, { temperature: 0, seed });
  const doubled = [...problems, ...problems];
  const sampled = await evaluatePolicy(policy, doubled, { temperature: 1, seed: seed + 1 });
  return { greedy, sampled };
}

/**
 * A short, deliberately weak SFT warm start in two parts. First, rounds on demonstrations that mostly
 * use the calculator, until sampled tool calls usually end in the right answer (the tool format and
 * copying numbers are what take SFT long to learn). Then a few steps on demonstrations that mostly guess
 * the answer outright: the policy ends up preferring to guess (greedy accuracy near zero) while the
 * tool path stays reachable when sampling — RL can only re-weight behaviours the warm start made
 * reachable, and has to discover that the tool is what pays.
 */
const TOOL_SUCCESS_TARGET = 0.6;

async function warmStart(policy: PolicyBundle, demo: Problem[], train: Problem[]) {
  let optimizer: Awaited<ReturnType<typeof sft>>["optimizer"] | undefined;
  const round = async (label: string, toolShare: number, steps: number, index: number) => {
    const res = await sft(
      policy.model,
      demonstrations(demo, toolShare, seed + index) as unknown as SftExample[],
      {
        template: policy.template,
        steps,
        batchSize: 32,
        learningRate: 2e-3,
        warmupSteps: 10,
        optimizer,
        seed: seed + index,
      },
    );
    optimizer = res.optimizer;
    const check = await evaluatePolicy(policy, train.slice(0, 64), {
      temperature: 1,
      seed: seed + 17 + index,
    });
    console.log(
      `[calc-agent] warm start ${label} (${steps} steps, ${pct(toolShare)} tool demos): loss ${res.losses.at(-1)!.toFixed(3)}, ${Math.round(res.tokensPerSecond)} tok/s;` +
        ` sampled: accuracy ${pct(check.accuracy)}, tool use ${pct(check.toolUse)}, tool success ${pct(check.toolSuccess)} (${elapsed()})`,
    );
    return check;
  };
  const maxRounds = 6;
  let i = 0;
  for (; i < maxRounds; i++) {
    const check = await round(`round ${i + 1}`, Number(args["tool-share"]), Number(args["sft-steps"]), i);
    if (check.toolUse > 0 && check.toolSuccess >= TOOL_SUCCESS_TARGET) break;
  }
  if (i === maxRounds)
    console.warn("[calc-agent] warning: sampled tool calls still mostly fail; RL may not find the tool");
  await round("last round", Number(args["guess-tool-share"]), Number(args["guess-steps"]), maxRounds);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
