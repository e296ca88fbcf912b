import { createWriteStream, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { RoleScores } from "../examples/two-role-agent/src/evaluate.js";
import type { Arm } from "../examples/two-role-agent/src/experiment.js";
import type { SeedResult } from "../examples/two-role-agent/src/job.js";
import { SETTINGS } from "../examples/two-role-agent/src/settings.js";
import { runSeedProcess } from "./support/seed-process.js";

const SEEDS = (process.env.SEEDS ?? "1,2,3").split(",").map(Number);
const here = dirname(fileURLToPath(import.meta.url));
const results = join(here, "results");
const jsonPath = join(results, "two-role.json");
const root = process.env.BENCH_ROOT ?? mkdtempSync(join(tmpdir(), "agl-two-role-"));
const logFile = process.env.RENDER_ONLY ? null : createWriteStream(join(results, "two-role.log"));
const t0 = performance.now();

function runSeed(seed: number): Promise<SeedResult> {
  const out = join(root, `seed-${seed}`);
  const args = [...(process.env.RESUME ? ["--resume"] : [])];
  return runSeedProcess<SeedResult>({
    script: join(here, "support/two-role-seed.ts"),
    seed,
    out,
    args,
    logFile,
  });
}

const previous = process.env.RENDER_ONLY
  ? (JSON.parse(readFileSync(jsonPath, "utf8")) as {
      seeds: SeedResult[];
      seconds: number;
      loadAverage: { start: number; end: number };
    })
  : null;
const startLoad = loadavg()[0]!;
const seeds = previous?.seeds ?? (await Promise.all(SEEDS.map(runSeed)));
const seconds = previous?.seconds ?? (performance.now() - t0) / 1000;
const loadAverage = previous?.loadAverage ?? { start: startLoad, end: loadavg()[0]! };
logFile?.end();

const ARMS: Array<[Arm, string]> = [
  ["shared", "(a) one shared adapter, rank 8"],
  ["per-role", "(b) an adapter per role, rank 4 each"],
];
const KEYS: Array<[keyof RoleScores, string]> = [
  ["accuracy", "task accuracy"],
  ["writer", "writer's first proposal right"],
  ["checker", "checker's verdict right"],
  ["checkerBalanced", "checker on fixed proposals (balanced)"],
  ["rejected", "sent back"],
];
const pts = (x: number) => (100 * x).toFixed(1);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const sd = (xs: number[]) => {
  const m = mean(xs);
  return xs.length < 2 ? 0 : Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1));
};
type Mode = "greedy" | "sampled";
const score = (s: SeedResult, arm: Arm | "warmup", mode: Mode, key: keyof RoleScores) =>
  (arm === "warmup" ? s.warmup.test : s.arms[arm]!.test)[mode][key];
const complete = seeds.filter((s) => ARMS.every(([a]) => s.arms[a]));

const lines: string[] = [];
const summary: Record<string, Record<string, { mean: number; sd: number; perSeed: number[] }>> = {};
for (const mode of ["greedy", "sampled"] as Mode[]) {
  lines.push(
    "",
    `### Test split, ${mode === "greedy" ? "greedy" : `sampled at temperature 1 (${SETTINGS.evalSamples} per problem)`}: mean ± sd over ${complete.length} seeds (per seed)`,
    "",
    `| | after warm-up | ${ARMS.map(([, l]) => l).join(" | ")} | (b) - (a), per seed |`,
    "| --- | ---: | ---: | ---: | --- |",
  );
  for (const [key, label] of KEYS) {
    const cell = (arm: Arm | "warmup") => {
      const xs = complete.map((s) => score(s, arm, mode, key));
      summary[`${mode}/${key}`] ??= {};
      summary[`${mode}/${key}`]![arm] = { mean: mean(xs), sd: sd(xs), perSeed: xs };
      return `${pts(mean(xs))} ± ${pts(sd(xs))} (${xs.map(pts).join(", ")})`;
    };
    const diffs = complete.map((s) => score(s, "per-role", mode, key) - score(s, "shared", mode, key));
    lines.push(
      `| ${label} | ${cell("warmup")} | ${cell("shared")} | ${cell("per-role")} | ${diffs.map((d) => `${d >= 0 ? "+" : ""}${pts(d)}`).join(", ")} |`,
    );
  }
}
const perSeed = [
  "",
  "| seed | arm | trainable parameters | GRPO seconds | trained tokens | training reward, first 5 / last 5 steps (writer, checker) |",
  "| --- | --- | ---: | ---: | ---: | --- |",
];
for (const s of complete)
  for (const [arm, label] of ARMS) {
    const r = s.arms[arm]!;
    const avg = (xs: typeof r.curve, k: "writer" | "checker") => pts(mean(xs.map((c) => c[k])));
    const first = r.curve.slice(0, 5);
    const last = r.curve.slice(-5);
    perSeed.push(
      `| ${s.seed} | ${label} | ${r.trainableParameters.toLocaleString()} | ${r.seconds.toFixed(0)} | ${r.trainedTokens.toLocaleString()} | ${avg(first, "writer")}, ${avg(first, "checker")} / ${avg(last, "writer")}, ${avg(last, "checker")} |`,
    );
  }

writeFileSync(
  jsonPath,
  `${JSON.stringify({ settings: SETTINGS, seeds, summary, seconds, loadAverage, cpus: cpus().length }, null, 2)}\n`,
);
const g = SETTINGS.grpo;
const md = `# Two roles, one base: one shared LoRA adapter vs an adapter per role (bench/two-role.ts)

The example in \`examples/two-role-agent\`: a writer proposes the largest of three different digits, a checker
accepts the proposal or sends it back once (then the writer's second answer stands); reward 1 when the answer
that stands is right. Model: a fresh Qwen3-architecture checkpoint in the Hugging Face layout (hidden 64, 2
layers, real Qwen3 tokenizer trimmed to the task), the same format-only warm-up for both arms of a seed
(${SETTINGS.warmup.steps} SFT steps of ${SETTINGS.warmup.batchSize} demonstrations whose writer is right ${pts(SETTINGS.warmup.writerSkill)}% and checker ${pts(SETTINGS.warmup.checkerSkill)}% of the time), then GRPO
on LoRA adapters over the frozen warm-up weights through the proxy: ${g.steps} steps of ${g.problemsPerStep} problems x ${g.rolloutsPerProblem} rollouts, Adam at ${g.learningRate},
both roles trained on the final reward, every call of a step in one update per adapter.

- (a) **one shared adapter** (rank ${2 * g.rank}, alpha ${g.scale * 2 * g.rank}) that both roles run on (\`policies: { writer: { adapter: "shared" }, checker: { adapter: "shared" } }\`);
- (b) **an adapter per role** (rank ${g.rank}, alpha ${g.scale * g.rank} each).

Same compute: the same rollouts, steps, rewards and per-role GRPO groups (so the same advantages for every call),
the same trainable parameters (two rank-${g.rank} adapters = one rank-${2 * g.rank} adapter) and LoRA scale (alpha/rank ${g.scale}). What
differs is only what the arms are: (b) has two Adam states and two updates per step, each over one role's
calls; (a) one of each over both roles' calls.

Test split: 20 digit sets (120 problems, each set in its 6 orders) never seen in training, never used to choose
anything. Seeds ${complete.map((s) => s.seed).join(", ")}, each its own process, all at once on ${cpus().length} cores; wall time ${seconds.toFixed(0)} s with the load
average at ${loadAverage.start.toFixed(1)} at the start and ${loadAverage.end.toFixed(1)} at the end (other engineers' work), so times are only comparable within a row pair.
${lines.join("\n")}
${perSeed.join("\n")}

Sampled scores are over ${complete.map((x) => x.warmup.test.sampled.n).join("/")} episodes after the warm-up and ${complete.map((x) => x.arms["per-role"]!.test.sampled.n).join("/")} per arm (seeds ${complete.map((x) => x.seed).join("/")}); greedy over 120.

Raw output: \`bench/results/two-role.log\`; every number above: \`bench/results/two-role.json\`.
`;
writeFileSync(join(results, "two-role.md"), md);
console.log(md);
