/**
 * calc-agent: train a tiny tool-using agent end to end on this machine.
 *
 *   1. generate arithmetic word problems (train / demonstration / held-out validation splits);
 *   2. warm-start a fresh 2-layer transformer by SFT on imperfect demonstrations (only some use the
 *      calculator), until sampled tool use is common enough for RL to amplify (platform notes: >= ~20%);
 *   3. GRPO with the PPO algorithm on the core Trainer: SQLite store, in-process runners, the policy
 *      served behind the LLM proxy, the agent unchanged (`openai` SDK + its own calculator tool);
 *   4. print held-out accuracy before and after, where the plot and metrics are, and the time taken.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { consoleLogger, Trainer } from "@agl/core";
import { SqliteLightningStore } from "@agl/store";
import {
  ChatTemplate,
  loadLatestPPOCheckpoint,
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
import { evaluatePolicy } from "./evaluate.js";

const { values: args } = parseArgs({
  options: {
    out: { type: "string", default: "calc-agent-run" },
    steps: { type: "string", default: "30" },
    "sft-steps": { type: "string", default: "150" },
    "tool-share": { type: "string", default: "0.4" },
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
  const splits = makeSplits({ train: 2000, demo: 1200, val: 100 }, seed);
  const tokenizer = new Tokenizer({ chars: alphabet([...splits.train, ...splits.demo, ...splits.val]) });
  const template = new ChatTemplate(tokenizer);
  const model = PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 64,
    nLayers: 2,
    nHeads: 4,
    contextLength: 192,
    seed,
  });
  const policy = { model, tokenizer, template };
  console.log(
    `[calc-agent] policy: ${model.parameterCount.toLocaleString()} parameters, vocabulary ${tokenizer.vocabSize}`,
  );

  const greedy = (problems: readonly Problem[]) => evaluatePolicy(policy, problems, { temperature: 0, seed });

  if (args.resume) {
    const ckpt = await loadLatestPPOCheckpoint(out);
    if (!ckpt) throw new Error(`--resume: no checkpoint in ${out}`);
    await ckpt.restoreInto(model, null);
  } else await warmStart(policy, splits.demo, splits.train);
  const warm = await greedy(splits.val);
  console.log(
    `[calc-agent] after warm start (${elapsed()}): held-out accuracy ${pct(warm.accuracy)}, tool use ${pct(warm.toolUse)}`,
  );

  const config: PPOConfigInput = {
    algorithm: { adv_estimator: "grpo" },
    data: { train_batch_size: 16, max_prompt_length: 128, max_response_length: 96 },
    actor_rollout_ref: {
      // Held-out accuracy of the sampled policy (temperature 1, 2 samples per problem): what RL optimises.
      rollout: { n: 8, temperature: 1, val_kwargs: { n: 2, temperature: 1 } },
      actor: { ppo_mini_batch_size: 16, ppo_micro_batch_size_per_gpu: 128, optim: { lr: 5e-4 } },
    },
    trainer: {
      total_training_steps: Number(args.steps),
      test_freq: 10,
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
  const trainer = new Trainer({
    algorithm: new PPO<Problem>({ config, policy }),
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

  const before = result.initialValidation?.accuracy ?? warm.accuracy;
  const after = result.finalValidation?.accuracy ?? Number.NaN;
  const final = await greedy(splits.val);
  console.log("");
  console.log(`[calc-agent] held-out validation accuracy (${splits.val.length} problems):`);
  console.log("                    sampled (T=1, x2)   greedy");
  console.log(
    `  after warm start  ${pct(before).padEnd(19)} ${pct(warm.accuracy)}   (greedy tool use ${pct(warm.toolUse)})`,
  );
  console.log(
    `  after GRPO        ${pct(after).padEnd(19)} ${pct(final.accuracy)}   (greedy tool use ${pct(final.toolUse)})`,
  );
  console.log(
    `  improvement       ${((after - before) * 100).toFixed(1)} points sampled, ${((final.accuracy - warm.accuracy) * 100).toFixed(1)} greedy, over ${result.stepsCompleted} RL steps`,
  );
  console.log(`[calc-agent] plot: ${result.plotPath}`);
  console.log(`[calc-agent] metrics: ${result.metricsPath}`);
  console.log(`[calc-agent] checkpoint: ${result.checkpointDir}`);
  console.log(`[calc-agent] total time ${elapsed()}${result.aborted ? " (interrupted)" : ""}`);
}

/**
 * SFT in chunks until sampled tool use with a correct result reaches ~20% of train problems: RL can
 * only re-weight behaviours the warm start made reachable.
 */
async function warmStart(
  policy: { model: PolicyModel; template: ChatTemplate; tokenizer: Tokenizer },
  demo: Problem[],
  train: Problem[],
) {
  const examples = demonstrations(demo, Number(args["tool-share"]), seed) as unknown as SftExample[];
  const chunk = Number(args["sft-steps"]);
  let optimizer: Awaited<ReturnType<typeof sft>>["optimizer"] | undefined;
  for (let round = 0; round < 4; round++) {
    const res = await sft(policy.model, examples, {
      template: policy.template,
      steps: chunk,
      batchSize: 32,
      learningRate: 2e-3,
      warmupSteps: 10,
      optimizer,
      seed: seed + round,
    });
    optimizer = res.optimizer;
    const check = await evaluatePolicy(policy, train.slice(0, 64), {
      temperature: 1,
      seed: seed + 17 + round,
    });
    console.log(
      `[calc-agent] warm start round ${round + 1}: loss ${res.losses.at(-1)!.toFixed(3)}, ${Math.round(res.tokensPerSecond)} tok/s;` +
        ` sampled: accuracy ${pct(check.accuracy)}, tool use ${pct(check.toolUse)}, tool success ${pct(check.toolSuccess)} (${elapsed()})`,
    );
    if (check.toolUse * check.toolSuccess >= 0.2) return;
  }
  console.warn("[calc-agent] warning: sampled tool success is still below 20%; RL may not find the tool");
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
