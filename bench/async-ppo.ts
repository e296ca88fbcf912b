/**
 * Asynchronous PPO (issue 26): synchronous training (max_staleness 0) vs max_staleness 1 and 2 on a task
 * with long-tailed rollout lengths. Each rollout makes one call to the policy (the tiny {a, b} policy of
 * the PPO tests; reward = share of "a" in its 6-token reply) and then waits for a simulated tool: 0.1-0.5 s
 * for 80% of the rollouts and 2-4 s for the other 20%, drawn from the rollout's seed, so every staleness
 * level sees the same latencies for the same rollout. The waits stand for work outside this process (a
 * tool server, a sandbox, a remote environment): they cost no CPU here, which is what makes the
 * comparison meaningful on a 2-core machine whose cores also run the policy and the trainer.
 *
 * Same number of trained rollouts for every run (12 steps x 8 prompts x 4 rollouts), 3 seeds, all runs
 * with `tis_imp_ratio_cap: 2`. Measures wall time per step, rollouts trained per minute (validation
 * excluded), trainer idle time (waiting for rollouts), runner utilisation and engine idle time (share of
 * time with no LLM call in flight), the lag distribution, and held-out accuracy at the end (16 held-out
 * prompts x 4 samples, temperature 1, success = at least 4 of 6 tokens are "a").
 * Writes bench/results/async-ppo.{json,md} and the raw per-step metrics to async-ppo-runs.jsonl.
 * `ASYNC_BENCH_TOOL_SCALE=0 ASYNC_BENCH_NAME=async-ppo-no-latency` runs the same without tool latency
 * (compute-bound: generation, runners and the optimiser all on this machine's cores).
 *
 *   nice -n 10 pnpm exec tsx bench/async-ppo.ts
 */
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { InMemoryLightningStore, rollout, silentLogger, Trainer } from "@agl/core";
import {
  ChatTemplate,
  PolicyModel,
  PPO,
  type PPOResult,
  SeededRandom,
  selectBackend,
  Tokenizer,
} from "@agl/trainer-gpu";
import OpenAI from "openai";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "results");
const STEPS = Number(process.env.ASYNC_BENCH_STEPS ?? 12);
const SEEDS = (process.env.ASYNC_BENCH_SEEDS ?? "1,2,3").split(",").map(Number);
const STALENESS = (process.env.ASYNC_BENCH_K ?? "0,1,2").split(",").map(Number);
/** Scales the simulated tool latency; 0 makes the task compute-bound (everything on this machine's cores). */
const TOOL_SCALE = Number(process.env.ASYNC_BENCH_TOOL_SCALE ?? 1);
const NAME = process.env.ASYNC_BENCH_NAME ?? "async-ppo";
const BATCH = 8;
const N = 4;

type Task = { prompt: string };
const tokenizer = new Tokenizer({ chars: "ab" });
const template = new ChatTemplate(tokenizer);
const train: Task[] = Array.from({ length: 32 }, (_, i) => ({ prompt: i % 2 ? "a" : "b" }));
const heldOut: Task[] = Array.from({ length: 16 }, (_, i) => ({ prompt: i % 2 ? "ab" : "ba" }));

/** Simulated tool latency of a rollout, from its seed: the long tail is what async training hides. */
export function toolSeconds(seed: number): number {
  const rng = new SeededRandom(seed);
  return rng.next() < 0.8 ? 0.1 + 0.4 * rng.next() : 2 + 2 * rng.next();
}

interface Activity {
  running: number;
  calls: number;
}

function makeAgent(activity: Activity) {
  return rollout<Task>(async (task, { llm, rollout: r }) => {
    activity.running++;
    try {
      const meta = r.metadata as { seed: number };
      const client = new OpenAI({ baseURL: llm!.endpoint, apiKey: llm!.api_key ?? "none", maxRetries: 6 });
      activity.calls++;
      let text = "";
      try {
        const res = await client.chat.completions.create({
          model: llm!.model,
          messages: [{ role: "user", content: task.prompt }],
          max_tokens: 6,
          temperature: llm!.sampling_parameters.temperature as number,
          seed: meta.seed,
        });
        text = res.choices[0]!.message.content ?? "";
      } finally {
        activity.calls--;
      }
      if (TOOL_SCALE > 0)
        await new Promise((resolve) => setTimeout(resolve, TOOL_SCALE * toolSeconds(meta.seed) * 1000));
      return [...text].filter((ch) => ch === "a").length / 6;
    } finally {
      activity.running--;
    }
  });
}

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
  heldOutReward: number;
  cpuSeconds: number;
}

async function runOnce(staleness: number, seed: number): Promise<RunSummary> {
  const dir = mkdtempSync(join(tmpdir(), "agl-async-bench-"));
  const activity: Activity = { running: 0, calls: 0 };
  const runners = (staleness + 1) * BATCH * N;
  let samples = 0;
  let runningSum = 0;
  let idleSamples = 0;
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
          rollout: { n: N, max_staleness: staleness, val_kwargs: { temperature: 1, n: 4 } },
          actor: { ppo_mini_batch_size: BATCH, optim: { lr: 1e-2 }, tis_imp_ratio_cap: 2 },
        },
        trainer: {
          total_training_steps: STEPS,
          test_freq: STEPS,
          val_before_train: false,
          default_local_dir: dir,
          logger: [],
          seed,
        },
        agentlightning: { poll_interval_seconds: 0.05 },
      },
      policy: {
        model: PolicyModel.create({
          vocabSize: tokenizer.vocabSize,
          dModel: 32,
          nLayers: 1,
          nHeads: 2,
          contextLength: 32,
          seed,
        }),
        tokenizer,
        template,
      },
      handleSignals: false,
      successThreshold: 4 / 6,
    });
    const trainer = new Trainer({
      algorithm,
      store: new InMemoryLightningStore(),
      runnerConcurrency: runners,
      pollIntervalMs: 5,
      logger: silentLogger,
    });
    const { result } = await trainer.fit<Task, PPOResult>(makeAgent(activity), train, {
      valDataset: heldOut,
    });
    const cpu = process.cpuUsage(cpu0);
    const steps = result.history.filter((h) => "training/n_rollouts" in h.metrics);
    for (const h of result.history)
      appendFileSync(join(out, `${NAME}-runs.jsonl`), `${JSON.stringify({ staleness, seed, ...h })}\n`);
    const sum = (key: string) => steps.reduce((a, h) => a + (h.metrics[key] ?? 0), 0);
    const trainSeconds = sum("timing_s/step");
    const trained = sum("training/n_rollouts");
    const lags = steps.flatMap((h) =>
      Array.from({ length: staleness + 1 }, (_, j) =>
        Array(h.metrics[`async/staleness/n_${j}`] ?? 0).fill(j),
      ),
    );
    const flat = lags.flat() as number[];
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
      heldOutAccuracy: result.finalValidation?.accuracy ?? Number.NaN,
      heldOutReward: result.finalValidation?.reward ?? Number.NaN,
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
    };
  } finally {
    clearInterval(sampler);
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
        `k=${k} seed=${seed}: ${fmt(r.secondsPerStep)} s/step, ${fmt(r.rolloutsPerMinute, 0)} rollouts/min, trainer idle ${fmt(100 * r.trainerIdleShare, 0)}%, runners busy ${fmt(100 * r.runnerUtilisation, 0)}%, engine idle ${fmt(100 * r.engineIdleShare, 0)}%, lag mean ${fmt(r.meanLag)} max ${r.maxLag}, held-out acc ${fmt(r.heldOutAccuracy)}`,
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
      cpuSecondsPerRollout: mean(rs.map((r) => r.cpuSeconds / r.trainedRollouts)),
    };
  });
  const base = byK.find((b) => b.staleness === 0);
  const json = {
    backend: selection.label,
    cores: cpus().length,
    loadAverage: { before: loadBefore, after: loadAfter },
    steps: STEPS,
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
    `Backend ${selection.label}, ${cpus().length} cores, load average ${fmt(loadBefore)} before / ${fmt(loadAfter)} after (shared machine). ${STEPS} steps x ${BATCH} prompts x ${N} rollouts per run, seeds ${SEEDS.join(", ")}; means over seeds. Tool latency x${TOOL_SCALE}. Generated by \`bench/async-ppo.ts\`; raw per-step metrics in \`${NAME}-runs.jsonl\`.`,
    "",
    "| max_staleness | s / step | rollouts trained / min | vs sync | trainer idle | runners busy | engine idle | mean lag | held-out acc (per seed) | acc vs sync (points) | CPU s / rollout |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
    ...json.summary.map(
      (b) =>
        `| ${b.staleness} | ${fmt(b.secondsPerStep)} | ${fmt(b.rolloutsPerMinute, 0)} | ${b.speedupVsSync ? `${fmt(b.speedupVsSync)}x` : "-"} | ${fmt(100 * b.trainerIdleShare, 0)}% | ${fmt(100 * b.runnerUtilisation, 0)}% | ${fmt(100 * b.engineIdleShare, 0)}% | ${fmt(b.meanLag)} | ${fmt(b.heldOutAccuracy)} (${b.heldOutAccuracies.map((a) => fmt(a)).join(", ")}) | ${b.accuracyDeltaPoints === null ? "-" : fmt(b.accuracyDeltaPoints, 1)} | ${fmt(b.cpuSecondsPerRollout, 3)} |`,
    ),
    "",
  ];
  writeFileSync(join(out, `${NAME}.md`), `${lines.join("\n")}\n`);
  console.log(lines.join("\n"));
}

await main();
