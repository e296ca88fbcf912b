/**
 * Pretrain a base for the job (`--base DIR` of src/main.ts): a fresh Qwen3 checkpoint of the job's shape with the
 * Qwen3 tokenizer trimmed to the task and the corpus, trained with SFT on the generic corpus
 * (src/base-corpus.ts: copying into tool calls of generic tools, repeating; nothing of the task) in one
 * thread for a fixed number of steps from a fixed seed, so the same command gives the same weights:
 *
 *   pnpm --filter @agl/example-calc-agent-qwen3 pretrain-base -- --steps 2000 --out base
 *
 * `--from DIR` continues from a checkpoint this script wrote (refused unless its tokenizer is the base's);
 * `--decay cosine` lowers the rate from `--lr` to `--lr/10` over `--steps`; `--free-text S` makes a share S
 * of the corpus free-text chats of two calls (src/base-corpus-free-text.ts).
 *
 * Every `--every` steps it logs the loss, the teacher-forced copy accuracy on held-out corpus chats, and
 * (as transfer, the validation split only) the task's copy accuracy (src/copy-accuracy.ts), and writes the
 * checkpoint to `--out`; `--stop-at A` ends the run at the first evaluation whose corpus copy accuracy is
 * at least A (also deterministic).
 */
import { rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  exportPretrained,
  loadPretrainedPolicy,
  type SftExample,
  selectBackend,
  sft,
  sftLoss,
  tf,
} from "@agl/trainer-gpu";
import { baseTokenizer } from "./base.js";
import { baseCorpus } from "./base-corpus.js";
import { MODEL_NAME, MODEL_SHAPE, writeInitialCheckpoint } from "./checkpoint.js";
import { orExitOnUsage } from "./cli-checks.js";
import { assistantDigitAccuracy, copyAccuracy } from "./copy-accuracy.js";
import { describePlaces, digitAccuracyByPlace } from "./copy-places.js";
import { makeSplits } from "./dataset.js";
import { CachedChatEncoder, describeCopy, pct } from "./experiment.js";
import { checkFromTokenizer, learningRateAt, parsePretrainArgs } from "./pretrain-options.js";
import { MAIN_JOB } from "./settings.js";

const tokenizer = baseTokenizer();
const o = await orExitOnUsage("[pretrain-base]", async () => {
  const options = parsePretrainArgs(process.argv.slice(2));
  if (options.from) await checkFromTokenizer(resolve(options.from), tokenizer);
  return options;
});
const { seed, every } = o;
const out = resolve(o.out);

await selectBackend();
const fresh = join(tmpdir(), `calc-agent-base-${process.pid}`);
if (!o.from)
  await writeInitialCheckpoint(fresh, seed, MODEL_SHAPE, { tokenizer, name: `${MODEL_NAME}-base` });
const policy = await loadPretrainedPolicy(o.from ? resolve(o.from) : fresh);
const template = new CachedChatEncoder(policy.template);
const corpus = baseCorpus(o.corpus, seed, { freeText: o["free-text"] }) as unknown as SftExample[];
// Held out: short chats as before, and (when training on them) free-text chats, measured apart.
const heldOut = baseCorpus(100, seed + 1_000_003);
const heldOutFree = o["free-text"] > 0 ? baseCorpus(100, seed + 2_000_003, { freeText: 1 }) : [];
const val = makeSplits(MAIN_JOB.splits, seed).val.slice(0, MAIN_JOB.sft.valLossExamples);
console.log(
  `[pretrain-base] ${policy.model.parameterCount.toLocaleString()} parameters, vocabulary ${policy.tokenizer.vocabSize}; ${JSON.stringify(o)}`,
);
// Our own Adam, its rate set before every step: sft() leaves the rate of an optimizer passed in alone.
const optimizer = tf.train.adam(learningRateAt(0, o));
const setRate = (step: number) => {
  (optimizer as unknown as { learningRate: number }).learningRate = learningRateAt(step, o);
};
const cpu0 = process.cpuUsage();
let tokens = 0;
try {
  for (let step = 0; step < o.steps; step += every) {
    const chunk = Math.min(every, o.steps - step);
    setRate(step);
    const res = await sft(policy.model, corpus, {
      template,
      steps: chunk,
      batchSize: o.batch,
      microBatchSize: o.micro,
      optimizer,
      seed: seed * 1000 + step,
      onStep: (info) => {
        tokens += info.sequenceTokens;
        setRate(step + info.step + 1);
      },
    });
    const loss = sftLoss(policy.model, heldOut as unknown as SftExample[], { template }).loss;
    const copy = assistantDigitAccuracy(policy.model, template, heldOut);
    const free = heldOutFree.length ? digitAccuracyByPlace(policy.model, template, heldOutFree) : undefined;
    const task = copyAccuracy(policy.model, template, val);
    const cpu = process.cpuUsage(cpu0);
    await exportPretrained(policy.model, out);
    console.log(
      `[pretrain-base] step ${step + chunk}: loss ${res.losses.at(-1)!.toFixed(3)}, held-out loss ${loss.toFixed(3)}, held-out copy ${pct(copy)}${free ? ` (free text ${describePlaces(free)})` : ""}, lr ${learningRateAt(step + chunk - 1, o).toExponential(2)}; task validation ${describeCopy(task)}; ${tokens.toLocaleString()} tokens, process CPU ${((cpu.user + cpu.system) / 1e6).toFixed(0)} s; wrote ${out}`,
    );
    if (copy >= o["stop-at"]) break;
  }
} finally {
  optimizer.dispose();
  policy.model.dispose();
  await rm(fresh, { recursive: true, force: true });
}
