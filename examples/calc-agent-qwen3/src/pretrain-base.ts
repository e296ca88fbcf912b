/**
 * Pretrain a base for the job (`--base DIR` of src/main.ts): a fresh Qwen3 checkpoint of the job's shape with the
 * Qwen3 tokenizer trimmed to the task and the corpus, trained with SFT on the generic corpus
 * (src/base-corpus.ts: copying into tool calls of generic tools, repeating; nothing of the task) in one
 * thread for a fixed number of steps from a fixed seed, so the same command gives the same weights:
 *
 *   pnpm --filter @agl/example-calc-agent-qwen3 pretrain-base -- --steps 2000 --out base
 *
 * Every `--every` steps it logs the loss, the teacher-forced copy accuracy on held-out corpus chats, and
 * (as transfer, the validation split only) the task's copy accuracy (src/copy-accuracy.ts), and writes the
 * checkpoint to `--out`; `--stop-at A` ends the run at the first evaluation whose corpus copy accuracy is
 * at least A (also deterministic).
 */
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  exportPretrained,
  loadPretrainedPolicy,
  type SftExample,
  selectBackend,
  sft,
  sftLoss,
} from "@agl/trainer-gpu";
import { baseTokenizer } from "./base.js";
import { baseCorpus } from "./base-corpus.js";
import { MODEL_NAME, MODEL_SHAPE, writeInitialCheckpoint } from "./checkpoint.js";
import { assistantDigitAccuracy, copyAccuracy } from "./copy-accuracy.js";
import { makeSplits } from "./dataset.js";
import { CachedChatEncoder, describeCopy, pct } from "./experiment.js";
import { MAIN_JOB } from "./settings.js";

const argv = process.argv.slice(2);
if (argv[0] === "--") argv.shift();
const { values: a } = parseArgs({
  args: argv,
  options: {
    out: { type: "string", default: "base" },
    steps: { type: "string", default: "2000" },
    every: { type: "string", default: "50" },
    "stop-at": { type: "string", default: "1.01" },
    seed: { type: "string", default: "1" },
    lr: { type: "string", default: "0.01" },
    warmup: { type: "string", default: "50" },
    batch: { type: "string", default: "32" },
    /** Rows per micro-batch: length-balanced, so short rows are not padded to a tools block's length. */
    micro: { type: "string", default: "8" },
    /** Training chats (drawn once; held-out chats come from another seed). */
    corpus: { type: "string", default: "3000" },
  },
});
const n = (k: keyof typeof a) => Number(a[k]);
const seed = n("seed");
const every = n("every");
const out = resolve(a.out!);

await selectBackend();
const fresh = join(tmpdir(), `calc-agent-base-${process.pid}`);
await writeInitialCheckpoint(fresh, seed, MODEL_SHAPE, {
  tokenizer: baseTokenizer(),
  name: `${MODEL_NAME}-base`,
});
const policy = await loadPretrainedPolicy(fresh);
const template = new CachedChatEncoder(policy.template);
const corpus = baseCorpus(n("corpus"), seed) as unknown as SftExample[];
const heldOut = baseCorpus(100, seed + 1_000_003);
const val = makeSplits(MAIN_JOB.splits, seed).val.slice(0, MAIN_JOB.sft.valLossExamples);
console.log(
  `[pretrain-base] ${policy.model.parameterCount.toLocaleString()} parameters, vocabulary ${policy.tokenizer.vocabSize}; ${JSON.stringify(a)}`,
);
let optimizer: Awaited<ReturnType<typeof sft>>["optimizer"] | undefined;
const cpu0 = process.cpuUsage();
let tokens = 0;
try {
  for (let step = 0; step < n("steps"); step += every) {
    const res = await sft(policy.model, corpus, {
      template,
      steps: every,
      batchSize: n("batch"),
      microBatchSize: n("micro"),
      learningRate: n("lr"),
      warmupSteps: step === 0 ? n("warmup") : 0,
      optimizer,
      seed: seed * 1000 + step,
      onStep: (info) => {
        tokens += info.sequenceTokens;
      },
    });
    optimizer = res.optimizer;
    const loss = sftLoss(policy.model, heldOut as unknown as SftExample[], { template }).loss;
    const copy = assistantDigitAccuracy(policy.model, template, heldOut);
    const task = copyAccuracy(policy.model, template, val);
    const cpu = process.cpuUsage(cpu0);
    await exportPretrained(policy.model, out);
    console.log(
      `[pretrain-base] step ${step + every}: loss ${res.losses.at(-1)!.toFixed(3)}, held-out loss ${loss.toFixed(3)}, held-out copy ${pct(copy)}; task validation ${describeCopy(task)}; ${tokens.toLocaleString()} tokens, process CPU ${((cpu.user + cpu.system) / 1e6).toFixed(0)} s; wrote ${out}`,
    );
    if (copy >= n("stop-at")) break;
  }
} finally {
  optimizer?.dispose();
  policy.model.dispose();
  await rm(fresh, { recursive: true, force: true });
}
