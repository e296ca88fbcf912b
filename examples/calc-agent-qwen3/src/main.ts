/**
 * calc-agent: train a Qwen3-architecture function-calling agent end to end on this machine, and export it.
 *
 *   1. write a fresh Qwen3 checkpoint (config.json, model.safetensors, the real Qwen3 tokenizer trimmed to
 *      the task, its chat template, generation_config.json), or copy a pretrained one (`--base DIR`, made by
 *      src/pretrain-base.ts), and generate two-step word problems;
 *   2. SFT it on imperfect demonstrations (most finish the second step in the head) until validation stops
 *      improving; keep the best checkpoint (chosen on the validation split);
 *   3. GRPO with LoRA adapters on that checkpoint through the real stack: SQLite store, in-process runner,
 *      the policy served by PolicyServer (Hermes tool calls) behind the LLM proxy, the agent an ordinary
 *      `openai` SDK function-calling loop;
 *   4. print test accuracy of the best SFT checkpoint and after GRPO, export the merged checkpoint and the
 *      PEFT adapter, and print the `vllm serve` command for them.
 */
import { rmSync } from "node:fs";
import { join, resolve } from "node:path";
import {
  applyLora,
  exportPeftAdapter,
  exportPretrained,
  type PolicyWorkers,
  type PretrainedPolicy,
  selectBackend,
  startPolicyWorkers,
} from "@agl/trainer-gpu";
import { MODEL_NAME } from "./checkpoint.js";
import { orExitOnUsage } from "./cli-checks.js";
import { makeSplits, type Splits } from "./dataset.js";
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
import { parseJobArgs } from "./job-options.js";
import { MAIN_JOB } from "./settings.js";

const args = await orExitOnUsage("calc-agent:", () => parseJobArgs(process.argv.slice(2)));

const seed = args.seed;
const out = resolve(args.out);
const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`${line} (${elapsed()})`);
const nWorkers = args.workers;
const withWorkers = async <T>(
  policy: PretrainedPolicy,
  fn: (w?: PolicyWorkers) => Promise<T>,
): Promise<T> => {
  const workers = nWorkers > 0 ? await startPolicyWorkers(policy, { workers: nWorkers }) : undefined;
  try {
    return await fn(workers);
  } finally {
    await workers?.close();
  }
};

async function main(): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  await selectBackend();
  const splits = makeSplits(MAIN_JOB.splits, seed);
  const policy = await createPolicy(
    join(out, "initial"),
    seed,
    args.base === undefined ? undefined : resolve(args.base),
  );
  console.log(
    `[calc-agent] ${MODEL_NAME}: Qwen3ForCausalLM, ${policy.model.parameterCount.toLocaleString()} parameters, Qwen3 tokenizer trimmed to ${policy.tokenizer.vocabSize} tokens, ${args.base === undefined ? "from scratch" : `from ${args.base}`}; ${args.steps} GRPO steps; ${nWorkers > 0 ? `${nWorkers} worker threads` : "one thread"}`,
  );
  try {
    await run(policy, splits);
  } finally {
    policy.model.dispose();
  }
}

async function run(policy: PretrainedPolicy, splits: Splits) {
  const before = await withWorkers(policy, async (workers) => {
    const warm = await sftToPlateau(policy, splits, {
      ...MAIN_JOB.sft,
      chainShare: args.chainShare,
      maxSteps: args.sftMaxSteps,
      learningRate: args.sftLr,
      shortSteps: args.sftShortSteps,
      workers,
      seed,
      log,
    });
    log(`[calc-agent] best SFT checkpoint: step ${warm.bestStep} of ${warm.steps}`);
    return heldOut(policy, splits.test, seed * 31 + 5, workers);
  });
  log(`[calc-agent] best SFT on the test split: ${describeHeldOut(before)}`);
  const sftDir = join(out, "sft-best");
  await exportPretrained(policy.model, sftDir);

  // GRPO trains LoRA adapters on the frozen best-SFT weights.
  applyLora(policy.model, { ...MAIN_JOB.grpo.lora, seed });
  const { grpo, after } = await withWorkers(policy, async (workers) => {
    const grpo = await runGrpo(policy, splits, {
      ...MAIN_JOB.grpo,
      steps: args.steps,
      workers,
      seed,
      out: join(out, "grpo"),
    });
    return { grpo, after: await heldOut(policy, splits.test, seed * 31 + 5, workers) };
  });
  const mergedDir = join(out, "merged");
  const adapterDir = join(out, "adapter");
  await exportPretrained(policy.model, mergedDir);
  await exportPeftAdapter(policy.model, adapterDir, { baseModelNameOrPath: sftDir });

  const gain = (a: EvalResult, b: EvalResult) => `${((b.accuracy - a.accuracy) * 100).toFixed(1)} points`;
  console.log("");
  console.log(
    `[calc-agent] test accuracy (${splits.test.length} held-out problems, never used for choices):`,
  );
  console.log("                    greedy                      sampled (T=1, 2 per problem)");
  const row = (label: string, r: HeldOut) =>
    console.log(
      `  ${label.padEnd(16)}  ${`${pct(r.greedy.accuracy)} (two calls ${pct(r.greedy.chained)})`.padEnd(27)} ${pct(r.sampled.accuracy)} (two calls ${pct(r.sampled.chained)})`,
    );
  row("best SFT", before);
  row("after GRPO", after);
  console.log(
    `  improvement       ${gain(before.greedy, after.greedy).padEnd(27)} ${gain(before.sampled, after.sampled)}   (${grpo.result.stepsCompleted} GRPO steps, LoRA r=${MAIN_JOB.grpo.lora.rank})`,
  );
  console.log(`[calc-agent] metrics: ${grpo.result.metricsPath}`);
  console.log(`[calc-agent] merged checkpoint (transformers, vllm serve): ${mergedDir}`);
  console.log(`[calc-agent] PEFT adapter on ${sftDir}: ${adapterDir}`);
  console.log(
    `[calc-agent] serve both: vllm serve ${sftDir} --served-model-name ${MODEL_NAME} --enable-auto-tool-choice --tool-call-parser hermes --enable-lora --max-lora-rank ${MAIN_JOB.grpo.lora.rank} --lora-modules ${MODEL_NAME}-grpo=${adapterDir}`,
  );
  console.log(`[calc-agent] total time ${elapsed()}${grpo.result.aborted ? " (interrupted)" : ""}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
