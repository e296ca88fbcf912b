import { createWriteStream, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { lineChartSvg } from "@agl/trainer-gpu";
import { MAIN_JOB } from "../examples/calc-agent/src/settings.js";
import { barChartSvg } from "./support/bar-chart.js";
import type { SeedResult } from "./support/calc-agent-seed.js";
import { runSeedProcess } from "./support/seed-process.js";

const SEEDS = (process.env.SEEDS ?? "1,2,3").split(",").map(Number);
const SFT_ROOT = process.env.SFT_ROOT;
const here = dirname(fileURLToPath(import.meta.url));
const results = join(here, "results");
const root = mkdtempSync(join(tmpdir(), "agl-calc-controls-"));
const logPath = join(results, "calc-agent-controls.log");
const logFile = process.env.RENDER_ONLY ? null : createWriteStream(logPath);
const t0 = performance.now();

function runSeed(seed: number): Promise<SeedResult> {
  const out = join(root, `seed-${seed}`);
  const args = [...(SFT_ROOT ? ["--sft-dir", join(SFT_ROOT, `sft-${seed}`)] : [])];
  return runSeedProcess<SeedResult>({
    script: join(here, "support/calc-agent-seed.ts"),
    seed,
    out,
    args,
    logFile,
  });
}

// RENDER_ONLY=1 rewrites the report from the committed calc-agent-controls.json without running anything.
const jsonPath = join(results, "calc-agent-controls.json");
const previous = process.env.RENDER_ONLY
  ? (JSON.parse(readFileSync(jsonPath, "utf8")) as {
      seeds: SeedResult[];
      seconds: number;
      loadAverageAtStart: number;
      sftReused?: boolean;
    })
  : null;
const load = previous?.loadAverageAtStart ?? loadavg()[0]!;
const seeds = previous?.seeds ?? (await Promise.all(SEEDS.map(runSeed)));
const seconds = previous?.seconds ?? (performance.now() - t0) / 1000;
logFile?.end();

// [arm, table label, chart label (wrapped at its commas)]
const ARMS = [
  ["sft", "best SFT checkpoint", "best SFT, checkpoint"],
  ["more_sft", "+ more SFT, GRPO's schedule (control)", "+ more SFT, GRPO's schedule"],
  ["more_sft_cycle", "+ more SFT, another SFT cycle (control)", "+ more SFT, SFT cycle"],
  ["shuffled_grpo", "+ shuffled-reward GRPO (control)", "+ shuffled-, reward GRPO"],
  ["grpo", "+ GRPO", "+ GRPO"],
] as const;
const pts = (x: number) => (100 * x).toFixed(1);
const signed = (x: number) => `${x >= 0 ? "+" : ""}${(100 * x).toFixed(1)}`;
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

const rows: string[] = [];
for (const s of seeds) {
  for (const [arm, label] of ARMS) {
    const r = s.arms[arm].test;
    const base = s.arms.sft.test;
    const d = arm === "sft" ? "" : ` (${signed(r.greedy.accuracy - base.greedy.accuracy)})`;
    const ds = arm === "sft" ? "" : ` (${signed(r.sampled.accuracy - base.sampled.accuracy)})`;
    rows.push(
      `| ${s.seed} | ${label} | ${pts(r.greedy.accuracy)}${d} | ${pts(r.sampled.accuracy)}${ds} | ${pts(r.sampled.toolUse)} | ${s.arms[arm].seconds.toFixed(0)} |`,
    );
  }
}
const summary = ARMS.map(([arm, label]) => {
  const g = seeds.map((s) => s.arms[arm].test.greedy.accuracy - s.arms.sft.test.greedy.accuracy);
  const sm = seeds.map((s) => s.arms[arm].test.sampled.accuracy - s.arms.sft.test.sampled.accuracy);
  const abs = (k: "greedy" | "sampled") => pts(mean(seeds.map((s) => s.arms[arm].test[k].accuracy)));
  return arm === "sft"
    ? `| ${label} | ${abs("greedy")} | ${abs("sampled")} | | |`
    : `| ${label} | ${abs("greedy")} | ${abs("sampled")} | ${signed(mean(g))} [${g.map(signed).join(", ")}] | ${signed(mean(sm))} [${sm.map(signed).join(", ")}] |`;
});
const gain = (arm: (typeof ARMS)[number][0], k: "greedy" | "sampled") =>
  seeds.map((s) => s.arms[arm].test[k].accuracy - s.arms.sft.test[k].accuracy);
const within5 = (arm: (typeof ARMS)[number][0]) =>
  (["greedy", "sampled"] as const).every((k) => gain(arm, k).every((x) => Math.abs(x) <= 0.05));
const goals = {
  grpo_at_least_30_points_each_seed: (["greedy", "sampled"] as const).every((k) =>
    gain("grpo", k).every((x) => x >= 0.3),
  ),
  more_sft_within_5_points_each_seed: within5("more_sft"),
  more_sft_cycle_within_5_points_each_seed: within5("more_sft_cycle"),
  shuffled_grpo_within_5_points_each_seed: within5("shuffled_grpo"),
};
const met = (ok: boolean) => `**${ok ? "met" : "not met"}**`;

writeFileSync(
  jsonPath,
  `${JSON.stringify({ settings: MAIN_JOB, seeds, goals, seconds, loadAverageAtStart: load, cpus: cpus().length, sftReused: Boolean(previous?.sftReused ?? SFT_ROOT) }, null, 2)}\n`,
);

const bars = barChartSvg(
  "calc-agent: test accuracy by arm (mean of seeds; dots: each seed)",
  ARMS.map(([, , chart]) => chart),
  [
    { name: "greedy", values: ARMS.map(([arm]) => seeds.map((s) => s.arms[arm].test.greedy.accuracy)) },
    { name: "sampled", values: ARMS.map(([arm]) => seeds.map((s) => s.arms[arm].test.sampled.accuracy)) },
  ],
);
writeFileSync(join(results, "calc-agent-controls.svg"), bars);
const GRPO_COLORS = ["#1f5fa8", "#4e79a7", "#86a8d0"];
const SHUFFLED_COLORS = ["#b3541e", "#f28e2b", "#f5b77a"];
const curves = lineChartSvg(
  "calc-agent: validation accuracy during RL (sampled, 1 per problem)",
  seeds.flatMap((s, i) => [
    { name: `GRPO seed ${s.seed}`, color: GRPO_COLORS[i % 3]!, points: s.arms.grpo.valCurve ?? [] },
    {
      name: `shuffled seed ${s.seed}`,
      color: SHUFFLED_COLORS[i % 3]!,
      points: s.arms.shuffled_grpo.valCurve ?? [],
    },
  ]),
  "GRPO step",
  "validation accuracy",
);
writeFileSync(join(results, "calc-agent-rl-curves.svg"), curves);

const g = MAIN_JOB.grpo;
const rowsPerStep = g.problemsPerStep * g.rolloutsPerProblem;
const md = `# calc-agent: what RL adds over the best SFT checkpoint, with controls

\`pnpm exec tsx bench/calc-agent.ts\` — ${SEEDS.length} seeds run at once as separate single-threaded processes on
this ${cpus().length}-core machine (load average ${load.toFixed(1)} at the start; ${(seconds / 60).toFixed(1)} minutes in all).
Settings are the main job's (\`examples/calc-agent/src/settings.ts\`). SFT from scratch on ${MAIN_JOB.splits.demo}
demonstrations of which ${100 * MAIN_JOB.sft.toolShare}% use the calculator and the rest answer in the head ("I think 135+96 = 231."),
batch ${MAIN_JOB.sft.batchSize}, validated every ${MAIN_JOB.sft.evalEvery} steps on ${MAIN_JOB.splits.val} validation problems, until ${MAIN_JOB.sft.patience} validations in a row
improve neither the validation loss nor accuracy or ${MAIN_JOB.sft.maxSteps} steps, then a ${MAIN_JOB.sft.coolDownSteps}-step linear cool-down; the best
validated checkpoint is the start of every arm. GRPO: ${g.steps} steps x ${g.problemsPerStep} problems x ${g.rolloutsPerProblem} rollouts, Adam at
${g.learningRate} after a ${g.warmupSteps}-step warm-up. Both more-SFT controls run as many demonstrations, forward and backward, as
GRPO samples rollouts (${g.steps} x ${rowsPerStep}): one with GRPO's schedule (${g.steps} steps of ${rowsPerStep} at ${g.learningRate}, the same warm-up), so only
the objective differs; one as another cycle of the SFT recipe (steps of ${MAIN_JOB.sft.batchSize} at ${MAIN_JOB.sft.learningRate}, warm-up, linear cool-down).
Shuffled GRPO: the same GRPO with each step's rewards permuted across its ${rowsPerStep} rollouts (\`PPOOptions.mapRewards\`).

Accuracy on ${MAIN_JOB.splits.test} test problems (no choice in these runs looks at them: checkpoints are chosen on the validation split), in percent; greedy, and sampled at temperature 1
with two samples per problem. In brackets: change from the best SFT checkpoint, in points.

## Mean over seeds (change per seed in brackets)

| arm | greedy | sampled | greedy change | sampled change |
| --- | --- | --- | --- | --- |
${summary.join("\n")}

Targets: GRPO at least +30 points greedy and sampled on every seed: ${met(goals.grpo_at_least_30_points_each_seed)}.
Controls within 5 points (greedy and sampled) on every seed: more SFT with GRPO's schedule ${met(goals.more_sft_within_5_points_each_seed)};
another SFT cycle ${met(goals.more_sft_cycle_within_5_points_each_seed)}; shuffled-reward GRPO ${met(goals.shuffled_grpo_within_5_points_each_seed)}.

## Per seed

| seed | arm | greedy | sampled | sampled tool use | seconds |
| --- | --- | --- | --- | --- | --- |
${rows.join("\n")}

SFT: ${seeds.map((s) => `seed ${s.seed} best at step ${s.sft.bestStep} of ${s.sft.steps} (${s.sft.seconds.toFixed(0)} s)`).join("; ")}.${
  (previous?.sftReused ?? SFT_ROOT)
    ? `
The SFT phases (and their times) are those of an earlier run of the same code and settings, whose best
checkpoints this run started from (\`SFT_ROOT\`; SFT is deterministic for a seed); the minutes above do not
include them, and their log is \`calc-agent-controls-sft.log\` (its "best SFT" lines score the validation split).`
    : ""
}

Plots: \`calc-agent-controls.svg\` (test accuracy by arm), \`calc-agent-rl-curves.svg\` (validation accuracy
during GRPO and shuffled-reward GRPO). Raw numbers: \`calc-agent-controls.json\`; log: \`calc-agent-controls.log\`.
`;
writeFileSync(join(results, "calc-agent-controls.md"), md);
console.log(md);
