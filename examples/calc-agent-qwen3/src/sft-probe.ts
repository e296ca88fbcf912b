/**
 * SFT probe: the job's SFT from a fresh checkpoint for a fixed number of steps, printing every `--every`
 * steps the validation loss and the teacher-forced copy accuracy (src/copy-accuracy.ts), without the
 * greedy/sampled episodes. For comparing SFT settings (model shape, rate, batch) on the validation split
 * in minutes:
 *
 *   pnpm exec tsx examples/calc-agent-qwen3/src/sft-probe.ts --steps 120 --every 20 --lr 0.01 --batch 16 \
 *     [--hidden 128 --mlp 384 --heads 4 --kv-heads 2 --head-dim 32] [--seed 1] [--workers 2] \
 *     [--micro 32] [--warmup 10] [--chain-share 0.25] [--short-steps N] [--full-share 0.25 --full-share-end 0.5]
 *     [--base examples/calc-agent-qwen3/base]
 *
 * `--short-steps N` trains the first N steps on the demonstrations rendered without the tool preamble
 * (rows of ~100 tokens instead of ~250); copy accuracy is printed on both renderings.
 * `--full-share S` mixes full rows into those N steps (a mixed curriculum: the copying can form on the cheap
 * short rows while being used in the served context from step 0); the share moves linearly to
 * `--full-share-end` over the N steps. Use `--micro 8` so the length-balanced micro-batches keep the short
 * rows apart from the full ones (one micro-batch pads every row to the longest).
 * `--base DIR` starts from a pretrained checkpoint (the committed base: src/base.ts) instead of a fresh one
 * (the shape options then do not apply).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  exportPretrained,
  loadPretrainedPolicy,
  type SftExample,
  selectBackend,
  sft,
  sftLoss,
  startPolicyWorkers,
} from "@agl/trainer-gpu";
import { copyCheckpoint } from "./base.js";
import { MODEL_SHAPE, writeInitialCheckpoint } from "./checkpoint.js";
import { copyAccuracy } from "./copy-accuracy.js";
import { demonstrations, makeSplits } from "./dataset.js";
import { CachedChatEncoder, describeCopy } from "./experiment.js";
import { fullShareAt, mixRows } from "./row-mix.js";
import { MAIN_JOB } from "./settings.js";

const { values: a } = parseArgs({
  options: {
    steps: { type: "string", default: "120" },
    every: { type: "string", default: "20" },
    lr: { type: "string", default: String(MAIN_JOB.sft.learningRate) },
    batch: { type: "string", default: String(MAIN_JOB.sft.batchSize) },
    hidden: { type: "string", default: String(MODEL_SHAPE.hiddenSize) },
    mlp: { type: "string", default: String(MODEL_SHAPE.intermediateSize) },
    layers: { type: "string", default: String(MODEL_SHAPE.numLayers) },
    heads: { type: "string", default: String(MODEL_SHAPE.numHeads) },
    "kv-heads": { type: "string", default: String(MODEL_SHAPE.numKvHeads) },
    "head-dim": { type: "string", default: String(MODEL_SHAPE.headDim) },
    seed: { type: "string", default: "1" },
    workers: { type: "string", default: "2" },
    /** Rows per gradient micro-batch (default: half the batch, one per worker). */
    micro: { type: "string", default: "0" },
    warmup: { type: "string", default: "10" },
    "chain-share": { type: "string", default: String(MAIN_JOB.sft.chainShare) },
    /** The first N steps train on the demonstrations rendered without the tool preamble (short rows). */
    "short-steps": { type: "string", default: "0" },
    /** Share of full rows mixed into the short-row steps, at their start and at their end (linear). */
    "full-share": { type: "string", default: "0" },
    "full-share-end": { type: "string" },
    base: { type: "string" },
    /** Write the final weights here (a Hugging Face folder), e.g. to run episodes on them. */
    save: { type: "string" },
  },
});
const n = (k: keyof typeof a) => Number(a[k]);
const shape = {
  ...MODEL_SHAPE,
  hiddenSize: n("hidden"),
  intermediateSize: n("mlp"),
  numLayers: n("layers"),
  numHeads: n("heads"),
  numKvHeads: n("kv-heads"),
  headDim: n("head-dim"),
};
const seed = n("seed");
const batch = n("batch");
const every = n("every");

await selectBackend();
const dir = await mkdtemp(join(tmpdir(), "calc-sft-probe-"));
try {
  if (a.base) await copyCheckpoint(a.base, dir);
  else await writeInitialCheckpoint(dir, seed, shape);
  const policy = await loadPretrainedPolicy(dir);
  const splits = makeSplits(MAIN_JOB.splits, seed);
  const template = new CachedChatEncoder(policy.template);
  const chainShare = n("chain-share");
  const demos = demonstrations(splits.demo, chainShare, seed) as unknown as SftExample[];
  const shortDemos = demos.map((d) => ({ ...d, tools: null }));
  const valDemos = demonstrations(splits.val, chainShare, seed + 1) as unknown as SftExample[];
  const val = splits.val.slice(0, MAIN_JOB.sft.valLossExamples);
  const shareStart = n("full-share");
  const shareEnd = a["full-share-end"] === undefined ? shareStart : Number(a["full-share-end"]);
  const mix = { shortSteps: n("short-steps"), fullShare: shareStart, fullShareEnd: shareEnd };
  console.log(`[sft-probe] ${policy.model.parameterCount.toLocaleString()} parameters; ${JSON.stringify(a)}`);
  const workers = n("workers") > 0 ? await startPolicyWorkers(policy, { workers: n("workers") }) : undefined;
  let optimizer: Awaited<ReturnType<typeof sft>>["optimizer"] | undefined;
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let tokens = 0;
  try {
    for (let step = 0; step < n("steps"); step += every) {
      const short = step < n("short-steps");
      const share = short ? fullShareAt(mix, step, every) : 1;
      const res = await sft(policy.model, short ? mixRows(shortDemos, demos, share, step, batch) : demos, {
        template,
        steps: every,
        batchSize: batch,
        microBatchSize: n("micro") > 0 ? n("micro") : Math.ceil(batch / 2),
        workers,
        learningRate: n("lr"),
        warmupSteps: step === 0 ? n("warmup") : 0,
        optimizer,
        seed: seed * 1000 + step,
        onStep: (info) => {
          tokens += info.sequenceTokens;
        },
      });
      optimizer = res.optimizer;
      const valLoss = sftLoss(policy.model, valDemos.slice(0, val.length), { template }).loss;
      const copy = copyAccuracy(policy.model, template, val);
      const copyShort = copyAccuracy(policy.model, template, val, 16, false);
      const cpu = process.cpuUsage(cpu0);
      console.log(
        `[sft-probe] step ${step + every}${short ? ` (short rows${share > 0 ? `, ${(share * 100).toFixed(0)}% full` : ""})` : ""}: loss ${res.losses.at(-1)!.toFixed(3)}, validation loss ${valLoss.toFixed(3)}, full rows ${describeCopy(copy)}; short rows ${describeCopy(copyShort)}; ${tokens.toLocaleString()} tokens, ${((performance.now() - t0) / 1000).toFixed(0)} s, process CPU ${((cpu.user + cpu.system) / 1e6).toFixed(0)} s`,
      );
    }
    if (a.save) await exportPretrained(policy.model, a.save);
  } finally {
    optimizer?.dispose();
    await workers?.close();
    policy.model.dispose();
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
