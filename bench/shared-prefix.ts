/**
 * Shared-prefix training benchmark (issue 24): tokens/s of an SFT step (`trainStep`) and of a PPO actor
 * update (old log-probs + `updateActor`) on calc-agent-qwen3-like rows — the job's Qwen3 shape (tied head,
 * q/k norms, GQA), LoRA rank 8, every row starting with the same 150-token tool preamble — with
 * `PretrainedModel.sharePrefix` on and off, interleaved in one run (median of the repetitions). SFT rows:
 * 16 rows of 150 + 88..128 tokens (238-278, as the job's rows). PPO: two GRPO groups of 8 rollouts whose
 * prompt is the preamble + a 30-token question, responses of 60..100 tokens, micro-batches of 8.
 * Writes bench/results/shared-prefix.{json,md}.
 *
 *   pnpm exec tsx bench/shared-prefix.ts [--quick]
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  AdamW,
  applyLora,
  computeLogprobs,
  PretrainedModel,
  type RowTensors,
  SeededRandom,
  selectBackend,
  type TrainRow,
  tf,
  trainStep,
  updateActor,
} from "@agl/trainer-gpu";
import { qwen3JobArch, tokenStream } from "./support/qwen3-job-shape.js";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");
const REPS = quick ? 2 : 5;
const VOCAB = 640;
const PREAMBLE = 150;

const backend = (await selectBackend({ log: () => {} })).label;
const arch = qwen3JobArch(VOCAB);
const model = applyLora(PretrainedModel.random(arch, 1, { std: 0.05 }), { rank: 8, alpha: 16, seed: 1 });
model.sharedPrefixMinTokens = 16;

const tok = tokenStream(VOCAB, 12345);
const preamble = Array.from({ length: PREAMBLE }, tok);

// SFT: one batch of 16 transcripts; the assistant part (the suffix's last 60%) is trained.
const sftIds = Array.from({ length: 16 }, (_, b) => [
  ...preamble,
  ...Array.from({ length: 88 + ((b * 11) % 41) }, tok),
]);
const sftMask = sftIds.map((r) => r.map((_, t) => (t >= PREAMBLE + 0.4 * (r.length - PREAMBLE) ? 1 : 0)));
const sftTokens = sftIds.reduce((n, r) => n + r.length, 0);

// PPO: two prompts (preamble + question) x 8 rollouts.
const rows: TrainRow[] = [];
for (let g = 0; g < 2; g++) {
  const prompt = [...preamble, ...Array.from({ length: 30 }, tok)];
  for (let r = 0; r < 8; r++) {
    const response = Array.from({ length: 60 + ((r * 13 + g * 7) % 41) }, tok);
    rows.push({
      rolloutId: `g${g}r${r}`,
      uid: `g${g}`,
      score: r % 2,
      promptIds: prompt,
      responseIds: response,
      responseMask: response.map(() => 1),
      rolloutLogprobs: null,
      isDrop: false,
      responseTruncated: false,
    });
  }
}
const ppoTokens = rows.reduce((n, r) => n + r.promptIds.length + r.responseIds.length, 0);

function sftStep(): void {
  trainStep(model, { inputIds: sftIds, mask: sftMask, optimizer: tf.train.sgd(0) });
}

function ppoStep(): void {
  const old = computeLogprobs(model, rows, 8, 0, 1);
  const inputs: RowTensors[] = rows.map((row, i) => ({
    advantages: row.responseIds.map(() => row.score - 0.5),
    oldLogprobs: old.logprobs[i]!,
    refLogprobs: null,
    tisWeights: null,
  }));
  const optimizer = new AdamW(model.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
  updateActor(model, optimizer, rows, inputs, {
    miniBatchRows: 16,
    microBatchRows: 8,
    epochs: 1,
    shuffle: false,
    rng: new SeededRandom(1),
    padId: 0,
    clipLow: 0.2,
    clipHigh: 0.28,
    clipC: 3,
    aggMode: "token-mean",
    entropyCoeff: 0,
    useKlLoss: false,
    klLossCoef: 0,
    klLossType: "low_var_kl",
    gradClip: 1,
    lr: () => 0,
  });
  optimizer.dispose();
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** Interleaved timings (ms) of `fn` with sharing on and off, after one warm-up each. */
function measure(fn: () => void) {
  const times: Record<"shared" | "plain", number[]> = { shared: [], plain: [] };
  const cpu: Record<"shared" | "plain", number[]> = { shared: [], plain: [] };
  for (let rep = -1; rep < REPS; rep++) {
    for (const mode of ["shared", "plain"] as const) {
      model.sharePrefix = mode === "shared";
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      fn();
      const ms = performance.now() - t0;
      const c = process.cpuUsage(c0);
      if (rep >= 0) {
        times[mode].push(ms);
        cpu[mode].push((c.user + c.system) / 1000);
      }
    }
  }
  return {
    sharedMs: median(times.shared),
    plainMs: median(times.plain),
    sharedCpuMs: median(cpu.shared),
    plainCpuMs: median(cpu.plain),
    raw: times,
  };
}

const loadBefore = loadavg();
const sft = measure(sftStep);
const ppo = measure(ppoStep);
const loadAfter = loadavg();
const row = (name: string, tokens: number, m: ReturnType<typeof measure>) => ({
  name,
  tokens,
  sharedTokensPerS: tokens / (m.sharedMs / 1000),
  plainTokensPerS: tokens / (m.plainMs / 1000),
  speedup: m.plainMs / m.sharedMs,
  cpuSpeedup: m.plainCpuMs / m.sharedCpuMs,
  ...m,
});
const results = {
  date: new Date().toISOString(),
  backend,
  cpus: cpus().length,
  loadavg: { before: loadBefore, after: loadAfter },
  reps: REPS,
  model: { family: "qwen3", vocab: VOCAB, ...arch, lora: { rank: 8 } },
  rows: [
    row("SFT step (trainStep, 16 rows of 238-278 tokens, 150 shared)", sftTokens, sft),
    row("PPO: old log-probs + actor update (2 groups x 8, prompt 180, responses 60-100)", ppoTokens, ppo),
  ],
};
writeFileSync(join(here, "results", "shared-prefix.json"), `${JSON.stringify(results, null, 2)}\n`);
const md = [
  "# Shared-prefix training (bench/shared-prefix.ts)",
  "",
  `${results.date}, backend ${backend}, ${results.cpus} cores, load average ${loadBefore.map((x) => x.toFixed(2)).join(" ")} before / ${loadAfter.map((x) => x.toFixed(2)).join(" ")} after; median of ${REPS} interleaved repetitions.`,
  "Model: calc-agent-qwen3's shape (Qwen3, d=64, 2 layers, GQA 2/1, head_dim 32, tied head), vocab 640, LoRA rank 8.",
  "",
  "| workload | tokens | shared tok/s | plain tok/s | speedup (wall) | speedup (CPU time) |",
  "|---|---:|---:|---:|---:|---:|",
  ...results.rows.map(
    (r) =>
      `| ${r.name} | ${r.tokens} | ${r.sharedTokensPerS.toFixed(0)} | ${r.plainTokensPerS.toFixed(0)} | ${r.speedup.toFixed(2)}x | ${r.cpuSpeedup.toFixed(2)}x |`,
  ),
  "",
];
writeFileSync(join(here, "results", "shared-prefix.md"), md.join("\n"));
console.log(md.join("\n"));
model.dispose();
