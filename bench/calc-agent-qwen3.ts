import { createWriteStream, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { MAIN_JOB } from "../examples/calc-agent-qwen3/src/settings.js";
import type { Arm, SeedResult } from "./support/calc-agent-qwen3-seed.js";
import { runSeedProcess } from "./support/seed-process.js";

const SEEDS = (process.env.SEEDS ?? "1,2,3").split(",").map(Number);
const here = dirname(fileURLToPath(import.meta.url));
const results = join(here, "results");
const root = process.env.BENCH_ROOT ?? mkdtempSync(join(tmpdir(), "agl-calc-bench-"));
// BASE=DIR: every seed starts from that pretrained checkpoint folder (e.g. examples/calc-agent-qwen3/base, as
// the job's `--base`) instead of a fresh one; the results then go to calc-agent-qwen3-base-baselines.*.
const base = process.env.BASE ? resolve(process.env.BASE) : undefined;
const name = base ? "calc-agent-qwen3-base-baselines" : "calc-agent-qwen3-baselines";
const logPath = join(results, `${name}.log`);
const logFile = process.env.RENDER_ONLY || process.env.RENDER_FROM ? null : createWriteStream(logPath);
const t0 = performance.now();

function runSeed(seed: number): Promise<SeedResult> {
  const out = join(root, `seed-${seed}`);
  const args = ["--workers", "0", ...(base ? ["--base", base] : [])];
  return runSeedProcess<SeedResult>({
    script: join(here, "support/calc-agent-qwen3-seed.ts"),
    seed,
    out,
    args,
    logFile,
  });
}

// RENDER_ONLY=1 rewrites the report from the committed <name>.json without running anything.
const jsonPath = join(results, `${name}.json`);
const previous = process.env.RENDER_ONLY
  ? (JSON.parse(readFileSync(jsonPath, "utf8")) as {
      seeds: SeedResult[];
      seconds: number;
      loadAverageAtStart: number;
    })
  : null;
const startLoad = loadavg()[0]!;
// RENDER_FROM=DIR renders what the seed processes of a run in DIR (seed-<n>/result.json) have measured so far.
const renderFrom = process.env.RENDER_FROM;
const seeds =
  previous?.seeds ??
  (renderFrom
    ? SEEDS.map((seed) => join(renderFrom, `seed-${seed}`, "result.json"))
        .filter((f) => existsSync(f))
        .map((f) => JSON.parse(readFileSync(f, "utf8")) as SeedResult)
        .filter((s) => s.sft !== undefined)
    : await Promise.all(SEEDS.map(runSeed)));
const seconds =
  previous?.seconds ??
  (renderFrom ? Math.max(0, ...seeds.map((s) => s.seconds)) : (performance.now() - t0) / 1000);
logFile?.end();
const load = previous?.loadAverageAtStart ?? seeds[0]?.loadAverageAtStart ?? startLoad;

const ARMS: Array<[Arm, string]> = [
  ["sft", "best SFT checkpoint"],
  ["forced_tool", '(a) best SFT + tool_choice "required" (turns 1-2)'],
  ["rft", "(b) + rejection-sampling fine-tuning, GRPO's budget"],
  ["more_sft", "(c) + more SFT, GRPO's budget"],
  ["shuffled_grpo", "(d) + shuffled-reward GRPO"],
  ["grpo", "+ GRPO (LoRA)"],
];
const BASELINES: Arm[] = ["forced_tool", "rft", "more_sft", "shuffled_grpo"];
/** Arms run only on request (`--arms`), shown when a seed has them, never required for the goals. */
const EXTRA_ARMS: Array<[Arm, string]> = [["grpo_full", "+ GRPO (full fine-tuning, no adapters)"]];
const shown = [...ARMS, ...EXTRA_ARMS.filter(([arm]) => seeds.some((s) => s.arms[arm]))];
const pts = (x: number) => (100 * x).toFixed(1);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const acc = (s: SeedResult, arm: Arm, k: "greedy" | "sampled") => s.arms[arm]?.test[k].accuracy;

const rows: string[] = [];
for (const s of seeds) {
  for (const [arm, label] of shown) {
    const r = s.arms[arm];
    if (!r) continue;
    const p8 = r.passAt8 === undefined ? "" : pts(r.passAt8);
    const extra =
      r.kept !== undefined
        ? ` (${r.kept} of ${r.sequences} episodes kept)`
        : r.learningRate !== undefined
          ? ` (Adam at ${r.learningRate})`
          : "";
    rows.push(
      `| ${s.seed} | ${label}${extra} | ${pts(r.test.greedy.accuracy)} | ${pts(r.test.sampled.accuracy)} | ${p8} | ${pts(r.test.greedy.chained)} / ${pts(r.test.sampled.chained)} | ${r.seconds.toFixed(0)} |`,
    );
  }
}
const complete = seeds.filter((s) => ARMS.every(([arm]) => s.arms[arm]));
const margin = (s: SeedResult, k: "greedy" | "sampled") =>
  acc(s, "grpo", k)! - Math.max(...BASELINES.map((b) => acc(s, b, k)!));
const goals = {
  seeds_complete: complete.length,
  grpo_beats_strongest_baseline_by_10_each_seed:
    complete.length > 0 && complete.every((s) => margin(s, "greedy") >= 0.1 && margin(s, "sampled") >= 0.1),
  grpo_beats_best_sft_by_30_each_seed:
    complete.length > 0 &&
    complete.every((s) =>
      (["greedy", "sampled"] as const).every((k) => acc(s, "grpo", k)! - acc(s, "sft", k)! >= 0.3),
    ),
  grpo_minus_strongest_baseline: complete.map((s) => ({
    seed: s.seed,
    greedy: margin(s, "greedy"),
    sampled: margin(s, "sampled"),
  })),
};
writeFileSync(
  jsonPath,
  `${JSON.stringify({ settings: MAIN_JOB, base: base ? relative(join(here, ".."), base) : null, seeds, goals, seconds, loadAverageAtStart: load, cpus: cpus().length }, null, 2)}\n`,
);
const summary = shown.map(([arm, label]) => {
  const have = seeds.filter((s) => s.arms[arm]);
  if (have.length === 0) return `| ${label} | not run | | |`;
  const g = have.map((s) => acc(s, arm, "greedy")!);
  const sm = have.map((s) => acc(s, arm, "sampled")!);
  return `| ${label} | ${pts(mean(g))} [${g.map(pts).join(", ")}] | ${pts(mean(sm))} [${sm.map(pts).join(", ")}] | ${have.length} |`;
});
const met = (ok: boolean) => `**${ok ? "met" : "not met"}**`;
const g = MAIN_JOB.grpo;
const md = `# calc-agent: GRPO against the baselines that could beat it

\`pnpm exec tsx bench/calc-agent-qwen3.ts\` — seeds ${seeds.map((s) => s.seed).join(", ")} run at once as separate single-threaded processes on
this ${cpus().length}-core machine (load average ${load.toFixed(1)} at the start; ${(seconds / 60).toFixed(1)} minutes in all).
Settings are the job's (\`examples/calc-agent-qwen3/src/settings.ts\`): a Qwen3-architecture model ${base ? `copied from the pretrained checkpoint \`${relative(join(here, ".."), base)}\` (the job's \`--base\`)` : "written fresh"},
SFT on ${MAIN_JOB.splits.demo} demonstrations of two-step problems of which ${100 * MAIN_JOB.sft.chainShare}% do both steps with the calculator and the rest
do the second step in the head; best checkpoint chosen on the validation split. Every arm below starts from it.
GRPO: ${g.steps} steps x ${g.problemsPerStep} problems x ${g.rolloutsPerProblem} rollouts, LoRA r=${g.lora.rank} (alpha ${g.lora.alpha}), Adam at ${g.learningRate} after a ${g.warmupSteps}-step warm-up.
(b) RFT samples exactly GRPO's episodes per step from the current policy and takes one Adam step (same rate,
warm-up, adapters) of SFT on the rewarded ones; (c) ${g.steps} Adam steps of ${g.problemsPerStep * g.rolloutsPerProblem} demonstrations, same rate, warm-up and
adapters; (d) GRPO with each step's rewards permuted across its rollouts. (a) sends \`tool_choice: "required"\` on
the first two turns (PolicyServer forces the opening of a call; the model writes the arguments) and "auto" on the
third.

Accuracy in percent on ${scoredCount()} test problems (never used for a choice): greedy, and sampled at temperature 1 (2
samples per problem; 8 for the SFT row, whose pass@8 is the share of problems solved by at least one of 8).
"two calls": share of episodes that made two or more calculator calls (greedy / sampled).

## Mean over seeds (per seed in brackets)

| arm | greedy | sampled | seeds |
| --- | --- | --- | --- |
${summary.join("\n")}

Goals, on the ${complete.length} seed(s) with every arm: GRPO at least 10 points above the strongest of (a)-(d), greedy and
sampled, on each seed: ${met(goals.grpo_beats_strongest_baseline_by_10_each_seed)}; GRPO at least 30 points above the best SFT checkpoint: ${met(goals.grpo_beats_best_sft_by_30_each_seed)}.
GRPO minus the strongest baseline (points): ${goals.grpo_minus_strongest_baseline.map((m) => `seed ${m.seed} greedy ${(100 * m.greedy).toFixed(1)}, sampled ${(100 * m.sampled).toFixed(1)}`).join("; ") || "no complete seed"}.

## Per seed

| seed | arm | greedy | sampled | pass@8 | two calls | seconds |
| --- | --- | --- | --- | --- | --- | --- |
${rows.join("\n")}

SFT: ${seeds.map((s) => `seed ${s.seed} best at step ${s.sft.bestStep} of ${s.sft.steps} (${s.sft.seconds.toFixed(0)} s)`).join("; ")}.
Raw numbers: \`${name}.json\`; log: \`${name}.log\`.
`;
function scoredCount() {
  return MAIN_JOB.splits.test;
}
writeFileSync(join(results, `${name}.md`), md);
console.log(md);
