/**
 * Asynchronous PPO on the main job's task (examples/calc-agent, what `pnpm main` runs), at a reduced,
 * fixed amount of work: seed 1, the main job's data and settings (examples/calc-agent/src/settings.ts)
 * except SFT capped at `CALC_ASYNC_SFT_STEPS` steps (default 200, validated every 100) + the 100-step
 * cool-down, and `CALC_ASYNC_STEPS` GRPO steps (default 8) x 16 problems x 8 rollouts per arm. Both arms
 * start from the same SFT checkpoint and serve the policy from a PolicyServer in its own process
 * (bench/support/policy-engine.ts, as in bench/async-ppo.ts); they differ only in
 * `rollout.max_staleness` (0 = the synchronous loop, then 1), both with `tis_imp_ratio_cap: 2`.
 * Measures rollouts trained per minute, trainer idle time, lag, CPU time of trainer and engine, and test
 * accuracy after GRPO (200 test problems, greedy and 2 samples at temperature 1: the main job's).
 * Writes bench/results/async-ppo-calc-agent.{json,md} (`CALC_ASYNC_NAME` renames them);
 * `CALC_ASYNC_SFT_DIR=DIR` keeps the SFT checkpoint in DIR, or starts from the one kept there.
 *
 *   nice -n 10 pnpm exec tsx bench/async-ppo-calc-agent.ts
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
const SFT_STEPS = Number(process.env.CALC_ASYNC_SFT_STEPS ?? 200);
const GRPO_STEPS = Number(process.env.CALC_ASYNC_STEPS ?? 8);
const STALENESS = (process.env.CALC_ASYNC_K ?? "0,1").split(",").map(Number);
const NAME = process.env.CALC_ASYNC_NAME ?? "async-ppo-calc-agent";
/** Keep the SFT checkpoint here, or start from the one kept here (SFT is deterministic for a seed). */
const SFT_DIR = process.env.CALC_ASYNC_SFT_DIR;
const t0 = performance.now();
const log = (line: string) => console.log(`${line} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);

const fmt = (x: number, d = 2) => x.toFixed(d);
const work = mkdtempSync(join(tmpdir(), "agl-async-calc-"));
try {
  const backend = await selectBackend({ log: () => {} });
  const loadBefore = loadavg()[0] ?? 0;
  const splits = makeSplits(MAIN_JOB.splits, SEED);
  const sftDir = SFT_DIR ?? join(work, "sft");
  let warm: { bestStep: number; steps: number };
  if (SFT_DIR && existsSync(join(SFT_DIR, "sft.json"))) {
    warm = JSON.parse(readFileSync(join(SFT_DIR, "sft.json"), "utf8"));
    log(`SFT: reusing ${SFT_DIR}`);
  } else {
    const policy = createPolicy(splits, SEED);
    // SFT as the main job does it (two worker threads), capped; both arms start from its best checkpoint.
    const workers = await startPolicyWorkers(policy, { workers: 2 });
    const plateau = await sftToPlateau(policy, splits, {
      ...MAIN_JOB.sft,
      maxSteps: SFT_STEPS,
      evalEvery: 100,
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

  const arms = [];
  for (const k of STALENESS) {
    const start = await loadCheckpoint(sftDir);
    const engine = await startEngineProcess(sftDir, join(work, `engine-${k}`));
    const cpu0 = process.cpuUsage();
    try {
      const grpo = await runGrpo(start, splits, {
        ...MAIN_JOB.grpo,
        steps: GRPO_STEPS,
        testFreq: 0,
        seed: SEED,
        out: join(work, `grpo-${k}`),
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
      const after = await heldOut(start, splits.test, SEED * 31 + 5);
      const arm = {
        staleness: k,
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
      };
      arms.push(arm);
      log(
        `k=${k}: ${fmt(arm.rolloutsPerMinute, 0)} rollouts/min, trainer idle ${fmt(100 * arm.trainerIdleShare, 0)}%, lag ${fmt(arm.meanLag)}, CPU s trainer ${fmt(arm.trainerCpuSeconds, 0)} engine ${fmt(engineCpu, 0)}; test ${describeHeldOut(after)}`,
      );
    } finally {
      await engine.stop();
      start.model.dispose();
    }
  }
  const loadAfter = loadavg()[0] ?? 0;
  const base = arms.find((a) => a.staleness === 0);
  const json = {
    backend: backend.label,
    cores: cpus().length,
    loadAverage: { before: loadBefore, after: loadAfter },
    seed: SEED,
    sft: {
      maxSteps: SFT_STEPS,
      bestStep: warm.bestStep,
      steps: warm.steps,
      greedy: before.greedy.accuracy,
      sampled: before.sampled.accuracy,
    },
    grpo: { ...MAIN_JOB.grpo, steps: GRPO_STEPS, tis_imp_ratio_cap: 2 },
    arms: arms.map((a) => ({
      ...a,
      speedupVsSync: base ? a.rolloutsPerMinute / base.rolloutsPerMinute : null,
    })),
    seconds: (performance.now() - t0) / 1000,
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, `results/${NAME}.json`), `${JSON.stringify(json, null, 2)}\n`);
  const lines = [
    "# Asynchronous PPO on the main job's task (calc-agent), reduced fixed work",
    "",
    `Backend ${backend.label}, ${cpus().length} cores, load average ${fmt(loadBefore)} before / ${fmt(loadAfter)} after (shared machine). Seed ${SEED}; the main job's data and GRPO settings; SFT capped at ${SFT_STEPS} steps + cool-down (best checkpoint at step ${warm.bestStep} of ${warm.steps}: test greedy ${fmt(100 * before.greedy.accuracy, 1)}%, sampled ${fmt(100 * before.sampled.accuracy, 1)}%); then per arm ${GRPO_STEPS} GRPO steps x ${MAIN_JOB.grpo.problemsPerStep} problems x ${MAIN_JOB.grpo.rolloutsPerProblem} rollouts from that checkpoint, the policy served by a PolicyServer in its own process. Generated by \`bench/async-ppo-calc-agent.ts\`.`,
    "",
    "| max_staleness | rollouts trained / min | vs sync | trainer idle | mean lag | CPU s trainer / engine | test greedy | test sampled |",
    "|---|---|---|---|---|---|---|---|",
    ...json.arms.map(
      (a) =>
        `| ${a.staleness} | ${fmt(a.rolloutsPerMinute, 0)} | ${a.speedupVsSync ? `${fmt(a.speedupVsSync)}x` : "-"} | ${fmt(100 * a.trainerIdleShare, 0)}% | ${fmt(a.meanLag)} | ${fmt(a.trainerCpuSeconds, 0)} / ${fmt(a.engineCpuSeconds, 0)} | ${fmt(100 * a.greedy, 1)}% | ${fmt(100 * a.sampled, 1)}% |`,
    ),
    "",
  ];
  writeFileSync(join(here, `results/${NAME}.md`), `${lines.join("\n")}\n`);
  console.log(lines.join("\n"));
} finally {
  rmSync(work, { recursive: true, force: true });
}
