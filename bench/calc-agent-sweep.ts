/**
 * How the calc-agent's GRPO learning rate was chosen, on the validation split only: GRPO and
 * shuffled-reward GRPO from a seed's best SFT checkpoint with one setting changed (rate, warm-up, KL
 * penalty to the SFT checkpoint, steps), scored on the validation problems. Results in
 * bench/results/calc-agent-lr-sweep.md.
 *
 *   pnpm exec tsx bench/calc-agent-sweep.ts sft --seed 2 --dir /tmp/sweep          # SFT, saves the best checkpoint
 *   pnpm exec tsx bench/calc-agent-sweep.ts run --seed 2 --dir /tmp/sweep --lr 2e-4 --warmup 5 [--shuffle] [--kl 1]
 */
import { appendFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { loadCheckpoint, saveCheckpoint, selectBackend } from "@agl/trainer-gpu";
import { makeSplits } from "../examples/calc-agent/src/dataset.js";
import {
  createPolicy,
  describeHeldOut,
  heldOut,
  runGrpo,
  sftToPlateau,
  shuffleRewards,
} from "../examples/calc-agent/src/experiment.js";
import { MAIN_JOB } from "../examples/calc-agent/src/settings.js";

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    seed: { type: "string", default: "1" },
    dir: { type: "string", default: "calc-agent-sweep" },
    steps: { type: "string", default: String(MAIN_JOB.grpo.steps) },
    lr: { type: "string", default: String(MAIN_JOB.grpo.learningRate) },
    warmup: { type: "string", default: String(MAIN_JOB.grpo.warmupSteps) },
    kl: { type: "string", default: "0" },
    shuffle: { type: "boolean", default: false },
  },
});
const seed = Number(a.seed);
const checkpoint = join(a.dir!, `seed-${seed}`, "best-sft");
await selectBackend({ log: () => {} });
const splits = makeSplits(MAIN_JOB.splits, seed);
const valSeed = seed * 7 + 3;

if (positionals[0] === "sft") {
  const policy = createPolicy(splits, seed);
  const warm = await sftToPlateau(policy, splits, { ...MAIN_JOB.sft, seed, log: console.log });
  await saveCheckpoint(checkpoint, policy.model, {
    tokenizer: policy.tokenizer,
    template: policy.template,
    metadata: { bestStep: warm.bestStep },
  });
  console.log(`best SFT checkpoint (step ${warm.bestStep}) saved to ${checkpoint}`);
} else if (positionals[0] === "run") {
  const policy = await loadCheckpoint(checkpoint);
  const name = `seed-${seed}${a.shuffle ? "-shuffled" : ""}-lr${a.lr}-warmup${a.warmup}-kl${a.kl}-steps${a.steps}`;
  const out = join(a.dir!, "runs", name);
  // A rerun starts from an empty store (runGrpo creates the folder).
  rmSync(out, { recursive: true, force: true });
  const kl = Number(a.kl);
  const { result } = await runGrpo(policy, splits, {
    ...MAIN_JOB.grpo,
    steps: Number(a.steps),
    seed,
    out,
    testFreq: 0,
    learningRate: Number(a.lr),
    warmupSteps: Number(a.warmup),
    mapRewards: a.shuffle ? shuffleRewards : undefined,
    adjustConfig: (c) => ({
      ...c,
      actor_rollout_ref: {
        ...c.actor_rollout_ref,
        actor: { ...c.actor_rollout_ref!.actor, use_kl_loss: kl > 0, kl_loss_coef: kl },
      },
    }),
  });
  // Per step: training reward, and LLM calls per rollout beyond the first (about the share that used the tool).
  const byStep = result.history.map((h) => {
    const n = h.metrics["training/n_rollouts"] ?? 1;
    return {
      step: h.step,
      reward: h.metrics["training/reward"] ?? 0,
      extraCalls: ((h.metrics["training/n_triplets"] ?? n) - n) / n,
    };
  });
  const val = await heldOut(policy, splits.val, valSeed);
  console.log(`${name}: validation ${describeHeldOut(val)}`);
  appendFileSync(
    join(a.dir!, "results.jsonl"),
    `${JSON.stringify({ name, seed, lr: Number(a.lr), warmup: Number(a.warmup), kl, shuffled: a.shuffle, steps: Number(a.steps), val, byStep })}\n`,
  );
} else {
  console.error("usage: calc-agent-sweep.ts sft|run --seed N --dir DIR [options]");
  process.exit(2);
}
