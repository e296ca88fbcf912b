/**
 * Asynchronous PPO (issue 26): synchronous training (max_staleness 0) vs max_staleness 1 and 2 on a task
 * with long-tailed rollout lengths (bench/support/async-ppo-task.ts): answer with the prompt's letter
 * ("aaa" -> "aaaaaa", held out: lengths 4 and 7); problems whose answer is "b" make 3 simulated tool
 * calls, the others 1, each 0.1-0.5 s (80%) or 1-2 s (20%). The waits stand for work outside this process (a tool server, a sandbox, a remote
 * environment): they cost no CPU here.
 *
 * The inference engine runs in its own process, as it would be deployed (vLLM, SGLang, or a
 * `PolicyServer`): bench/support/policy-engine-process.ts serves the policy from a `VersionedEngine`,
 * and the trainer publishes every version with `externalEngine` + `ReloadHookSync` +
 * `updateWeightsFromDisk` (a checkpoint folder per version, loaded by the engine between requests
 * without a stop). `ASYNC_BENCH_ENGINE=inline` runs the default in-process server instead.
 *
 * Same number of trained rollouts for every run (STEPS x 8 prompts x 4 rollouts), 3 seeds, all runs
 * with `tis_imp_ratio_cap: 2`. Measures wall time per step, rollouts trained per minute (validation
 * excluded), trainer idle time (waiting for rollouts), runner utilisation, engine idle time (share of
 * time with no LLM call in flight), the lag distribution, CPU time of both processes, and held-out
 * accuracy at the end (4 held-out prompts x 32 samples at temperature 1, success = all six tokens
 * right), overall and per answer (slow vs fast problems).
 * Writes bench/results/<name>.{json,md} and the raw per-step metrics to <name>-runs.jsonl.
 * `ASYNC_BENCH_TOOL_SCALE=0` runs without tool latency (compute-bound on this machine's cores).
 *
 *   nice -n 10 pnpm exec tsx bench/async-ppo.ts
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryLightningStore, silentLogger, Trainer } from "@agl/core";
import { PolicyModel, PPO, type PPOResult, saveCheckpoint, selectBackend } from "@agl/trainer-gpu";
import {
  type Activity,
  heldOutAccuracy,
  makeAgent,
  splits,
  type Task,
  template,
  tokenizer,
} from "./support/async-ppo-task.js";
import { type EngineProcess, startEngineProcess } from "./support/policy-engine.js";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "results");
const STEPS = Number(process.env.ASYNC_BENCH_STEPS ?? 20);
const SEEDS = (process.env.ASYNC_BENCH_SEEDS ?? "1,2,3").split(",").map(Number);
const STALENESS = (process.env.ASYNC_BENCH_K ?? "0,1,2").split(",").map(Number);
/** Scales the simulated tool latency; 0 makes the task compute-bound (everything on this machine's cores). */
const TOOL_SCALE = Number(process.env.ASYNC_BENCH_TOOL_SCALE ?? 1);
const ENGINE = (process.env.ASYNC_BENCH_ENGINE ?? "process") as "process" | "inline";
const NAME = process.env.ASYNC_BENCH_NAME ?? "async-ppo";
const LR = Number(process.env.ASYNC_BENCH_LR ?? 1e-2);
const LAYERS = Number(process.env.ASYNC_BENCH_LAYERS ?? 1);
const BATCH = 8;
const N = 4;
const EVAL_SAMPLES = 32;
const { train, heldOut } = splits();

interface RunSummary {
  staleness: number;
  seed: number;
  steps: number;
  trainedRollouts: number;
  trainSeconds: number;
  secondsPerStep: number;
  rolloutsPerMinute: number;
  trainerIdleShare: number;
  runnerUtilisation: number;
  engineIdleShare: number;
  meanLag: number;
  maxLag: number;
  heldOutAccuracy: number;
  heldOutAccuracyA: number;
  heldOutAccuracyB: number;
  heldOutReward: number;
  trainRewardFirst: number;
  trainRewardLast: number;
  cpuSeconds: number;
  engineCpuSeconds: number;
}

async function runOnce(staleness: number, seed: number): Promise<RunSummary> {
  const dir = mkdtempSync(join(tmpdir(), "agl-async-bench-"));
  const activity: Activity = { running: 0, calls: 0 };
  const runners = (staleness + 1) * BATCH * N;
  let samples = 0;
  let runningSum = 0;
  let idleSamples = 0;
  const model = PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 32,
    nLayers: LAYERS,
    nHeads: 2,
    contextLength: 32,
    seed,
  });
  let engine: EngineProcess | null = null;
  if (ENGINE === "process") {
    await saveCheckpoint(join(dir, "initial"), model, { tokenizer, template });
    engine = await startEngineProcess(join(dir, "initial"), dir);
  }
  const sampler = setInterval(() => {
    samples++;
    runningSum += activity.running;
    if (activity.calls === 0) idleSamples++;
  }, 50);
  const cpu0 = process.cpuUsage();
  try {
    const algorithm = new PPO<Task>({
      config: {
        data: { train_batch_size: BATCH, max_prompt_length: 24, max_response_length: 6 },
        actor_rollout_ref: {
          rollout: { n: N, max_staleness: staleness },
          actor: { ppo_mini_batch_size: BATCH, optim: { lr: LR }, tis_imp_ratio_cap: 2 },
        },
        trainer: {
          total_training_steps: STEPS,
          test_freq: 0,
          val_before_train: false,
          default_local_dir: dir,
          logger: [],
          seed,
        },
        agentlightning: { poll_interval_seconds: 0.05 },
      },
      policy: { model, tokenizer, template },
      ...(engine ? { serve: engine.serve } : {}),
      handleSignals: false,
    });
    const trainer = new Trainer({
      algorithm,
      store: new InMemoryLightningStore(),
      runnerConcurrency: runners,
      pollIntervalMs: 5,
      logger: silentLogger,
    });
    const { result } = await trainer.fit<Task, PPOResult>(makeAgent(activity, TOOL_SCALE), train);
    const cpu = process.cpuUsage(cpu0);
    const engineCpuSeconds = engine ? engine.cpuMs() / 1000 : 0;
    clearInterval(sampler);
    const steps = result.history.filter((h) => "training/n_rollouts" in h.metrics);
    for (const h of result.history)
      appendFileSync(join(out, `${NAME}-runs.jsonl`), `${JSON.stringify({ staleness, seed, ...h })}\n`);
    const sum = (key: string) => steps.reduce((a, h) => a + (h.metrics[key] ?? 0), 0);
    const trainSeconds = sum("timing_s/step");
    const trained = sum("training/n_rollouts");
    const flat = steps.flatMap((h) =>
      Array.from({ length: staleness + 1 }, (_, j) =>
        Array<number>(h.metrics[`async/staleness/n_${j}`] ?? 0).fill(j),
      ).flat(),
    );
    const rewards = steps.map((h) => h.metrics["training/reward"] ?? 0);
    const third = Math.max(1, Math.floor(rewards.length / 4));
    const evaluation = await heldOutAccuracy(model, heldOut, EVAL_SAMPLES);
    return {
      staleness,
      seed,
      steps: steps.length,
      trainedRollouts: trained,
      trainSeconds,
      secondsPerStep: trainSeconds / steps.length,
      rolloutsPerMinute: (trained / trainSeconds) * 60,
      trainerIdleShare: sum("timing_s/gen") / trainSeconds,
      runnerUtilisation: samples ? runningSum / samples / runners : 0,
      engineIdleShare: samples ? idleSamples / samples : 0,
      meanLag: flat.length ? flat.reduce((a, b) => a + b, 0) / flat.length : 0,
      maxLag: flat.length ? Math.max(...flat) : 0,
      heldOutAccuracy: evaluation.accuracy,
      heldOutAccuracyA: evaluation.a,
      heldOutAccuracyB: evaluation.b,
      heldOutReward: evaluation.reward,
      trainRewardFirst: mean(rewards.slice(0, third)),
      trainRewardLast: mean(rewards.slice(-third)),
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      engineCpuSeconds,
    };
  } finally {
    clearInterval(sampler);
    await engine?.stop();
    model.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const fmt = (x: number, d = 2) => x.toFixed(d);

async function main() {
  const selection = await selectBackend({ backend: process.env.AGL_TF_BACKEND ?? "wasm", log: () => {} });
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, `${NAME}-runs.jsonl`), "");
  const loadBefore = loadavg()[0] ?? 0;
  console.log(`backend ${selection.label}; ${cpus().length} cores; load average ${loadBefore.toFixed(2)}`);
  const runs: RunSummary[] = [];
  // Interleaved by seed so a change in the machine's load hits every staleness level alike.
  for (const seed of SEEDS) {
    for (const k of STALENESS) {
      const r = await runOnce(k, seed);
      runs.push(r);
      console.log(
        `k=${k} seed=${seed}: ${fmt(r.secondsPerStep)} s/step, ${fmt(r.rolloutsPerMinute, 0)} rollouts/min, trainer idle ${fmt(100 * r.trainerIdleShare, 0)}%, runners busy ${fmt(100 * r.runnerUtilisation, 0)}%, engine idle ${fmt(100 * r.engineIdleShare, 0)}%, lag mean ${fmt(r.meanLag)} max ${r.maxLag}, held-out acc ${fmt(r.heldOutAccuracy)} (a ${fmt(r.heldOutAccuracyA)}, b ${fmt(r.heldOutAccuracyB)}), train reward ${fmt(r.trainRewardFirst)} -> ${fmt(r.trainRewardLast)}, CPU s trainer ${fmt(r.cpuSeconds, 1)} engine ${fmt(r.engineCpuSeconds, 1)}`,
      );
    }
  }
  const loadAfter = loadavg()[0] ?? 0;
  const byK = STALENESS.map((k) => {
    const rs = runs.filter((r) => r.staleness === k);
    return {
      staleness: k,
      secondsPerStep: mean(rs.map((r) => r.secondsPerStep)),
      rolloutsPerMinute: mean(rs.map((r) => r.rolloutsPerMinute)),
      trainerIdleShare: mean(rs.map((r) => r.trainerIdleShare)),
      runnerUtilisation: mean(rs.map((r) => r.runnerUtilisation)),
      engineIdleShare: mean(rs.map((r) => r.engineIdleShare)),
      meanLag: mean(rs.map((r) => r.meanLag)),
      heldOutAccuracy: mean(rs.map((r) => r.heldOutAccuracy)),
      heldOutAccuracies: rs.map((r) => r.heldOutAccuracy),
      heldOutReward: mean(rs.map((r) => r.heldOutReward)),
      heldOutAccuracyA: mean(rs.map((r) => r.heldOutAccuracyA)),
      heldOutAccuracyB: mean(rs.map((r) => r.heldOutAccuracyB)),
      trainRewardFirst: mean(rs.map((r) => r.trainRewardFirst)),
      trainRewardLast: mean(rs.map((r) => r.trainRewardLast)),
      cpuSecondsPerRollout: mean(rs.map((r) => (r.cpuSeconds + r.engineCpuSeconds) / r.trainedRollouts)),
    };
  });
  const base = byK.find((b) => b.staleness === 0);
  const json = {
    backend: selection.label,
    cores: cpus().length,
    loadAverage: { before: loadBefore, after: loadAfter },
    steps: STEPS,
    engine: ENGINE,
    learningRate: LR,
    toolLatencyScale: TOOL_SCALE,
    batch: BATCH,
    n: N,
    seeds: SEEDS,
    summary: byK.map((b) => ({
      ...b,
      speedupVsSync: base ? b.rolloutsPerMinute / base.rolloutsPerMinute : null,
      accuracyDeltaPoints: base ? 100 * (b.heldOutAccuracy - base.heldOutAccuracy) : null,
    })),
    runs,
  };
  writeFileSync(join(out, `${NAME}.json`), `${JSON.stringify(json, null, 2)}\n`);
  const lines = [
    TOOL_SCALE > 0
      ? "# Asynchronous PPO: staleness 0 vs 1 vs 2 (long-tailed rollouts)"
      : "# Asynchronous PPO: staleness 0 vs 1 vs 2 (no tool latency: compute-bound on this machine)",
    "",
    `Backend ${selection.label}, ${cpus().length} cores, load average ${fmt(loadBefore)} before / ${fmt(loadAfter)} after (shared machine). ${STEPS} steps x ${BATCH} prompts x ${N} rollouts per run, seeds ${SEEDS.join(", ")}; means over seeds. Tool latency x${TOOL_SCALE}. Engine: ${ENGINE === "process" ? "a PolicyServer in its own process, weights published over HTTP (`externalEngine` + `ReloadHookSync` + `updateWeightsFromDisk`)" : "the in-process PolicyServer"}. Generated by \`bench/async-ppo.ts\`; raw per-step metrics in \`${NAME}-runs.jsonl\`.`,
    "",
    "| max_staleness | s / step | rollouts trained / min | vs sync | trainer idle | runners busy | engine idle | mean lag | held-out acc (per seed) | acc vs sync (points) | acc fast / slow problems | held-out reward | train reward first -> last quarter | CPU s / rollout (both processes) |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ...json.summary.map(
      (b) =>
        `| ${b.staleness} | ${fmt(b.secondsPerStep)} | ${fmt(b.rolloutsPerMinute, 0)} | ${b.speedupVsSync ? `${fmt(b.speedupVsSync)}x` : "-"} | ${fmt(100 * b.trainerIdleShare, 0)}% | ${fmt(100 * b.runnerUtilisation, 0)}% | ${fmt(100 * b.engineIdleShare, 0)}% | ${fmt(b.meanLag)} | ${fmt(b.heldOutAccuracy)} (${b.heldOutAccuracies.map((a) => fmt(a)).join(", ")}) | ${b.accuracyDeltaPoints === null ? "-" : fmt(b.accuracyDeltaPoints, 1)} | ${fmt(b.heldOutAccuracyA)} / ${fmt(b.heldOutAccuracyB)} | ${fmt(b.heldOutReward)} | ${fmt(b.trainRewardFirst)} -> ${fmt(b.trainRewardLast)} | ${fmt(b.cpuSecondsPerRollout, 3)} |`,
    ),
    "",
  ];
  writeFileSync(join(out, `${NAME}.md`), `${lines.join("\n")}\n`);
  console.log(lines.join("\n"));
}

await main();
