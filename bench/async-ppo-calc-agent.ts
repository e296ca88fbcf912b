/**
 * Asynchronous PPO on the main job's task (examples/calc-agent, what `pnpm main` runs) at a fixed amount
 * of work: data seed 1 and the main job's data and settings (examples/calc-agent/src/settings.ts), SFT
 * either capped at `CALC_ASYNC_SFT_STEPS` steps (default 200, validated every 100) + the 100-step
 * cool-down, or with `CALC_ASYNC_SFT_STEPS=full` the main job's own SFT to its plateau (validated every
 * 50, patience 3, at most 600 + cool-down); then `CALC_ASYNC_STEPS` GRPO steps (default 8) x 16 problems
 * x 8 rollouts per arm and GRPO seed (`CALC_ASYNC_GRPO_SEEDS`, default "1"; the seed of sampling and of
 * the problem order). Every arm starts from the same SFT checkpoint (SFT runs once) and serves the policy
 * from a PolicyServer in its own process (bench/support/policy-engine.ts, as in bench/async-ppo.ts); arms
 * differ only in `rollout.max_staleness` (`CALC_ASYNC_K`, default "0,1"), all with `tis_imp_ratio_cap: 2`.
 * Runs seed by seed (every arm of a seed, then the next seed) and rewrites the results after each arm.
 * Measures rollouts trained per minute, trainer idle time, lag, CPU time of trainer and engine, and test
 * accuracy after GRPO (200 test problems, greedy and 2 samples at temperature 1: the main job's).
 * Writes bench/results/async-ppo-calc-agent.{json,md} (`CALC_ASYNC_NAME` renames them);
 * `CALC_ASYNC_SFT_DIR=DIR` keeps the SFT checkpoint in DIR, or starts from the one kept there.
 *
 *   nice -n 10 pnpm exec tsx bench/async-ppo-calc-agent.ts
 *   CALC_ASYNC_SFT_STEPS=full CALC_ASYNC_STEPS=20 CALC_ASYNC_GRPO_SEEDS=1,2,3 \
 *     CALC_ASYNC_NAME=async-ppo-calc-agent-full nice -n 5 pnpm exec tsx bench/async-ppo-calc-agent.ts
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadCheckpoint, saveCheckpoint, selectBackend, startPolicyWorkers } from "@agl/trainer-gpu";
import { makeSplits } from "../examples/calc-agent/src/dataset.js";
import {
  createPolicy,
  describeHeldOut,
  heldOut,
  runGrpo,
  sftToPlateau,
} from "../examples/calc-agent/src/experiment.js";
import { MAIN_JOB } from "../examples/calc-agent/src/settings.js";
import { startEngineProcess } from "./support/policy-engine.js";

const here = dirname(fileURLToPath(import.meta.url));
const SEED = 1;
/** "full": the main job's SFT to its plateau, as `pnpm main` runs it; a number: capped at that many steps. */
const FULL_SFT = process.env.CALC_ASYNC_SFT_STEPS === "full";
const SFT_STEPS = FULL_SFT ? MAIN_JOB.sft.maxSteps : Number(process.env.CALC_ASYNC_SFT_STEPS ?? 200);
const GRPO_SEEDS = (process.env.CALC_ASYNC_GRPO_SEEDS ?? "1").split(",").map(Number);
const GRPO_STEPS = Number(process.env.CALC_ASYNC_STEPS ?? 8);
const STALENESS = (process.env.CALC_ASYNC_K ?? "0,1").split(",").map(Number);
const NAME = process.env.CALC_ASYNC_NAME ?? "async-ppo-calc-agent";
/** Keep the SFT checkpoint here, or start from the one kept here (SFT is deterministic for a seed). */
const SFT_DIR = process.env.CALC_ASYNC_SFT_DIR;
const t0 = performance.now();
const log = (line: string) => console.log(`${line} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);

const fmt = (x: number, d = 2) => x.toFixed(d);
const splits = makeSplits(MAIN_JOB.splits, SEED);
const work = mkdtempSync(join(tmpdir(), "agl-async-calc-"));
interface Arm {
  staleness: number;
  grpoSeed: number;
  steps: number;
  trainedRollouts: number;
  trainSeconds: number;
  rolloutsPerMinute: number;
  trainerIdleShare: number;
  meanLag: number;
  trainerCpuSeconds: number;
  engineCpuSeconds: number;
  greedy: number;
  sampled: number;
  trainReward: number[];
  loadAverage: number;
}

/** One arm: GRPO from the SFT checkpoint at this staleness and GRPO seed, then the test split. */
async function runArm(sftDir: string, k: number, grpoSeed: number): Promise<Arm> {
  const start = await loadCheckpoint(sftDir);
  const engine = await startEngineProcess(sftDir, join(work, `engine-${k}-${grpoSeed}`));
  const cpu0 = process.cpuUsage();
  try {
    const grpo = await runGrpo(start, splits, {
      ...MAIN_JOB.grpo,
      steps: GRPO_STEPS,
      testFreq: 0,
      seed: grpoSeed,
      out: join(work, `grpo-${k}-${grpoSeed}`),
      serve: engine.serve,
      adjustConfig: (c) => ({
        ...c,
        actor_rollout_ref: {
          ...c.actor_rollout_ref,
          rollout: { ...c.actor_rollout_ref?.rollout, max_staleness: k },
          actor: { ...c.actor_rollout_ref?.actor, tis_imp_ratio_cap: 2 },
        },
      }),
    });
    const cpu = process.cpuUsage(cpu0);
    const engineCpu = engine.cpuMs() / 1000;
    const steps = grpo.result.history.filter((h) => "training/n_rollouts" in h.metrics);
    const sum = (key: string) => steps.reduce((a, h) => a + (h.metrics[key] ?? 0), 0);
    const seconds = sum("timing_s/step");
    const rollouts = sum("training/n_rollouts");
    // The same test episodes (seed) for every arm: arms differ only in their weights.
    const after = await heldOut(start, splits.test, SEED * 31 + 5);
    const arm: Arm = {
      staleness: k,
      grpoSeed,
      steps: steps.length,
      trainedRollouts: rollouts,
      trainSeconds: seconds,
      rolloutsPerMinute: (rollouts / seconds) * 60,
      trainerIdleShare: sum("timing_s/gen") / seconds,
      meanLag: sum("async/staleness/mean") / Math.max(1, steps.length),
      trainerCpuSeconds: (cpu.user + cpu.system) / 1e6,
      engineCpuSeconds: engineCpu,
      greedy: after.greedy.accuracy,
      sampled: after.sampled.accuracy,
      trainReward: steps.map((h) => h.metrics["training/reward"] ?? 0),
      loadAverage: loadavg()[0] ?? 0,
    };
    log(
      `k=${k} GRPO seed ${grpoSeed}: ${fmt(arm.rolloutsPerMinute, 0)} rollouts/min, trainer idle ${fmt(100 * arm.trainerIdleShare, 0)}%, lag ${fmt(arm.meanLag)}, CPU s trainer ${fmt(arm.trainerCpuSeconds, 0)} engine ${fmt(engineCpu, 0)}; test ${describeHeldOut(after)}`,
    );
    return arm;
  } finally {
    await engine.stop();
    start.model.dispose();
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
/** Sample standard deviation (n - 1); 0 for a single value. */
const sd = (xs: number[]) =>
  xs.length < 2 ? 0 : Math.sqrt(xs.reduce((a, x) => a + (x - mean(xs)) ** 2, 0) / (xs.length - 1));
const pm = (xs: number[], scale = 100, d = 1) => `${fmt(scale * mean(xs), d)} +- ${fmt(scale * sd(xs), d)}`;

/** Rewrite the json and md with every arm so far (a run cut short keeps what it measured). */
function writeResults(
  arms: Arm[],
  warm: { bestStep: number; steps: number },
  before: Awaited<ReturnType<typeof heldOut>>,
  loadBefore: number,
  backendLabel: string,
) {
  const loadAfter = loadavg()[0] ?? 0;
  const syncRate = (seed: number) =>
    arms.find((a) => a.staleness === 0 && a.grpoSeed === seed)?.rolloutsPerMinute;
  const rows = arms.map((a) => {
    const base = syncRate(a.grpoSeed);
    return { ...a, speedupVsSync: base ? a.rolloutsPerMinute / base : null };
  });
  const byK = STALENESS.map((k) => ({ k, rows: rows.filter((r) => r.staleness === k) })).filter(
    (g) => g.rows.length > 0,
  );
  const summary = byK.map(({ k, rows: rs }) => ({
    staleness: k,
    seeds: rs.map((r) => r.grpoSeed),
    greedy: { mean: mean(rs.map((r) => r.greedy)), sd: sd(rs.map((r) => r.greedy)) },
    sampled: { mean: mean(rs.map((r) => r.sampled)), sd: sd(rs.map((r) => r.sampled)) },
    rolloutsPerMinute: mean(rs.map((r) => r.rolloutsPerMinute)),
    // null when this run has no synchronous arm to compare with.
    speedupVsSync: rs.some((r) => r.speedupVsSync !== null)
      ? mean(rs.flatMap((r) => (r.speedupVsSync === null ? [] : [r.speedupVsSync])))
      : null,
    trainerIdleShare: mean(rs.map((r) => r.trainerIdleShare)),
    meanLag: mean(rs.map((r) => r.meanLag)),
  }));
  const sftLine = FULL_SFT
    ? `the main job's full SFT to its plateau (as \`pnpm main\` runs it: validated every ${MAIN_JOB.sft.evalEvery} steps, patience ${MAIN_JOB.sft.patience}, at most ${MAIN_JOB.sft.maxSteps} + ${MAIN_JOB.sft.coolDownSteps}-step cool-down)`
    : `SFT capped at ${SFT_STEPS} steps + cool-down`;
  const json = {
    backend: backendLabel,
    cores: cpus().length,
    loadAverage: { before: loadBefore, after: loadAfter },
    seed: SEED,
    grpoSeeds: GRPO_SEEDS,
    sft: {
      full: FULL_SFT,
      maxSteps: SFT_STEPS,
      bestStep: warm.bestStep,
      steps: warm.steps,
      greedy: before.greedy.accuracy,
      sampled: before.sampled.accuracy,
    },
    grpo: { ...MAIN_JOB.grpo, steps: GRPO_STEPS, tis_imp_ratio_cap: 2 },
    arms: rows,
    summary,
    seconds: (performance.now() - t0) / 1000,
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, `results/${NAME}.json`), `${JSON.stringify(json, null, 2)}\n`);
  const lines = [
    `# Asynchronous PPO on the main job's task (calc-agent)${FULL_SFT ? ", from the full SFT" : ", reduced fixed work"}`,
    "",
    `Backend ${backendLabel}, ${cpus().length} cores, load average ${fmt(loadBefore)} before / ${fmt(loadAfter)} after (shared machine). Data seed ${SEED}; the main job's data and GRPO settings; ${sftLine}, run once and shared by every arm (best checkpoint at step ${warm.bestStep} of ${warm.steps}: test greedy ${fmt(100 * before.greedy.accuracy, 1)}%, sampled ${fmt(100 * before.sampled.accuracy, 1)}%); then per arm and GRPO seed ${GRPO_STEPS} GRPO steps x ${MAIN_JOB.grpo.problemsPerStep} problems x ${MAIN_JOB.grpo.rolloutsPerProblem} rollouts from that checkpoint, the policy served by a PolicyServer in its own process. Test: ${splits.test.length} problems, greedy and 2 samples at T=1. Generated by \`bench/async-ppo-calc-agent.ts\`.`,
    "",
    "| max_staleness | GRPO seed | rollouts trained / min | vs sync (same seed) | trainer idle | mean lag | CPU s trainer / engine | load avg | test greedy | test sampled |",
    "|---|---|---|---|---|---|---|---|---|---|",
    ...rows.map(
      (a) =>
        `| ${a.staleness} | ${a.grpoSeed} | ${fmt(a.rolloutsPerMinute, 0)} | ${a.speedupVsSync ? `${fmt(a.speedupVsSync)}x` : "-"} | ${fmt(100 * a.trainerIdleShare, 0)}% | ${fmt(a.meanLag)} | ${fmt(a.trainerCpuSeconds, 0)} / ${fmt(a.engineCpuSeconds, 0)} | ${fmt(a.loadAverage)} | ${fmt(100 * a.greedy, 1)}% | ${fmt(100 * a.sampled, 1)}% |`,
    ),
    "",
    "| max_staleness | seeds | test greedy (mean +- sd) | test sampled (mean +- sd) | rollouts trained / min | vs sync | trainer idle | mean lag |",
    "|---|---|---|---|---|---|---|---|",
    ...byK.map(({ k, rows: rs }) => {
      const s = summary.find((x) => x.staleness === k)!;
      return `| ${k} | ${s.seeds.join(", ")} | ${pm(rs.map((r) => r.greedy))}% | ${pm(rs.map((r) => r.sampled))}% | ${fmt(s.rolloutsPerMinute, 0)} | ${s.speedupVsSync === null ? "-" : `${fmt(s.speedupVsSync)}x`} | ${fmt(100 * s.trainerIdleShare, 0)}% | ${fmt(s.meanLag)} |`;
    }),
    "",
  ];
  writeFileSync(join(here, `results/${NAME}.md`), `${lines.join("\n")}\n`);
}

try {
  const backend = await selectBackend({ log: () => {} });
  const loadBefore = loadavg()[0] ?? 0;
  const sftDir = SFT_DIR ?? join(work, "sft");
  let warm: { bestStep: number; steps: number };
  if (SFT_DIR && existsSync(join(SFT_DIR, "sft.json"))) {
    warm = JSON.parse(readFileSync(join(SFT_DIR, "sft.json"), "utf8"));
    log(`SFT: reusing ${SFT_DIR}`);
  } else {
    const policy = createPolicy(splits, SEED);
    // SFT as the main job does it (two worker threads), full or capped; every arm starts from its best checkpoint.
    const workers = await startPolicyWorkers(policy, { workers: 2 });
    const plateau = await sftToPlateau(policy, splits, {
      ...MAIN_JOB.sft,
      ...(FULL_SFT ? {} : { maxSteps: SFT_STEPS, evalEvery: 100 }),
      workers,
      seed: SEED,
      log,
    });
    await workers.close();
    warm = { bestStep: plateau.bestStep, steps: plateau.steps };
    await saveCheckpoint(sftDir, policy.model, { tokenizer: policy.tokenizer, template: policy.template });
    writeFileSync(join(sftDir, "sft.json"), JSON.stringify(warm));
    policy.model.dispose();
  }
  const sftPolicy = await loadCheckpoint(sftDir);
  const before = await heldOut(sftPolicy, splits.test, SEED * 31 + 5);
  sftPolicy.model.dispose();
  log(`SFT: best at step ${warm.bestStep} of ${warm.steps}; test ${describeHeldOut(before)}`);

  const arms: Arm[] = [];
  for (const grpoSeed of GRPO_SEEDS) {
    for (const k of STALENESS) {
      arms.push(await runArm(sftDir, k, grpoSeed));
      writeResults(arms, warm, before, loadBefore, backend.label);
    }
  }
  console.log(readFileSync(join(here, `results/${NAME}.md`), "utf8"));
} finally {
  rmSync(work, { recursive: true, force: true });
}
