/**
 * APO benchmark: how fast APO drives rollouts, how many optimiser calls a round makes, and what APO itself
 * costs per round once LLM latency is taken out.
 *
 * The agent is examples/apo-agent (openai SDK, system prompt from the prompt_template resource); the agent's
 * model, the critic and the editor are the mock server of @agl/core/mock-llm on loopback, with the editor
 * made to return a new, valid prompt every time (a unique note appended) so every step yields a candidate
 * and each round carries its full load: beamWidth 4 x branchFactor 4 = 16 steps, 16 x 4 training rollouts,
 * up to 20 x 16 validation rollouts, 32 for the leader. APO options are Agent Lightning's defaults.
 *
 * "overhead" is a round's wall time minus the time APO spent waiting on optimiser calls or rollouts
 * (overlapping waits counted once): store writes, reading spans, adapting them to messages, bookkeeping.
 * Rows: APO as configured by default (4 optimisation steps in parallel) on the in-memory and on a SQLite
 * file store; with 20 ms of latency on every LLM call (agent and optimiser), with 4 steps in parallel and
 * one at a time (the reference's order); and, as controls, a Baseline running the same number of rollouts
 * of the same agent without any optimisation, with and without the latency. Each row is the median of
 * REPEATS runs (different random seeds for APO's sampling).
 *
 *   pnpm exec tsx bench/apo.ts
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { APO, type ApoResult } from "@agl/apo";
import { mockArithmeticTasks, mockOptimizerResponder } from "@agl/apo/mock-optimizer";
import {
  type Algorithm,
  Baseline,
  type LightningStore,
  llm,
  promptTemplate,
  silentLogger,
  Trainer,
} from "@agl/core";
import { startMockLLMServer } from "@agl/core/mock-llm";
import { SqliteLightningStore } from "@agl/store";
import { apoAgent, SEED_SYSTEM_PROMPT } from "../examples/apo-agent/src/agent.js";
import { median } from "./support/median.js";

const REPEATS = Number(process.env.REPEATS ?? 3);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const here = dirname(fileURLToPath(import.meta.url));
const train = mockArithmeticTasks(64);
const val = mockArithmeticTasks(32, 1000);

interface Config {
  name: string;
  parallelSteps: number;
  store: "memory" | "sqlite";
  latencyMs: number;
}

interface Measurement {
  wallS: number;
  /** User + system CPU of this process (runners, agent, mock server, APO): robust to other load. */
  cpuS: number;
  cpuMsPerRollout: number;
  rollouts: number;
  rolloutsPerS: number;
  optimizerCallsPerRound: number;
  overheadMsPerRound: number;
  overheadMsPerRollout: number;
  roundWallS: number;
  candidatesPerRound: number;
}

/** A deterministic random source per seed, so repeats differ but are reproducible. */
function lcg(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

async function withWorld<R>(
  config: Pick<Config, "store" | "latencyMs">,
  fn: (baseURL: string, store: LightningStore) => Promise<R>,
): Promise<R> {
  const respond = mockOptimizerResponder();
  let note = 0;
  const server = await startMockLLMServer({
    delayMs: config.latencyMs,
    respond: (request) => {
      const reply = respond(request);
      if (request.body?.model !== "mock-editor" || typeof reply.content !== "string") return reply;
      return { content: reply.content.replace("</prompt>", `\nNote ${++note}.</prompt>`) };
    },
  });
  const dir = mkdtempSync(join(tmpdir(), "agl-bench-apo-"));
  const store = config.store === "sqlite" ? new SqliteLightningStore(join(dir, "bench.db")) : undefined;
  try {
    return await fn(server.baseURL, store as LightningStore);
  } finally {
    await store?.close();
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function trainer(
  baseURL: string,
  store: LightningStore | undefined,
  algorithm: Algorithm<any, any>,
): Trainer {
  return new Trainer({
    logger: silentLogger,
    ...(store ? { store } : {}),
    nRunners: 2,
    runnerConcurrency: 8,
    pollIntervalMs: 5,
    initialResources: {
      main_llm: llm({ endpoint: baseURL, model: "mock-model", api_key: "none" }),
      system_prompt: promptTemplate(SEED_SYSTEM_PROMPT),
    },
    algorithm,
  });
}

async function runApo(config: Config, seed: number): Promise<Measurement> {
  return withWorld(config, async (baseURL, store) => {
    const apo = new APO({
      baseURL,
      apiKey: "none",
      gradientModel: "mock-critic",
      applyEditModel: "mock-editor",
      beamRounds: ROUNDS,
      parallelSteps: config.parallelSteps,
      pollIntervalMs: 100,
      random: lcg(seed),
    });
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    const { result } = await trainer(baseURL, store, apo).fit<unknown, ApoResult>(apoAgent, train, {
      valDataset: val,
    });
    const cpu = process.cpuUsage(c0);
    const cpuS = (cpu.user + cpu.system) / 1e6;
    const wallS = (performance.now() - t0) / 1000;
    const rounds = result.rounds;
    const mean = (f: (r: ApoResult["rounds"][number]) => number) =>
      rounds.reduce((s, r) => s + f(r), 0) / rounds.length;
    const roundRollouts = rounds.reduce((s, r) => s + r.rollouts, 0);
    return {
      wallS,
      cpuS,
      cpuMsPerRollout: (cpuS * 1000) / result.rollouts,
      rollouts: result.rollouts,
      rolloutsPerS: result.rollouts / wallS,
      optimizerCallsPerRound: mean((r) => r.optimizerCalls),
      overheadMsPerRound: mean((r) => r.overheadMs),
      overheadMsPerRollout: rounds.reduce((s, r) => s + r.overheadMs, 0) / roundRollouts,
      roundWallS: mean((r) => r.wallMs) / 1000,
      candidatesPerRound: mean((r) => r.candidates.length),
    };
  });
}

async function runBaseline(rollouts: number, latencyMs: number): Promise<Measurement> {
  return withWorld({ store: "memory", latencyMs }, async (baseURL) => {
    const tasks = Array.from({ length: rollouts }, (_, i) => train[i % train.length]!);
    const t0 = performance.now();
    const c0 = process.cpuUsage();
    await trainer(baseURL, undefined, new Baseline({ maxQueueLength: 64, pollIntervalMs: 100 })).fit(
      apoAgent,
      tasks,
    );
    const cpu = process.cpuUsage(c0);
    const cpuS = (cpu.user + cpu.system) / 1e6;
    const wallS = (performance.now() - t0) / 1000;
    return {
      wallS,
      cpuS,
      cpuMsPerRollout: (cpuS * 1000) / rollouts,
      rollouts,
      rolloutsPerS: rollouts / wallS,
      optimizerCallsPerRound: 0,
      overheadMsPerRound: 0,
      overheadMsPerRollout: 0,
      roundWallS: 0,
      candidatesPerRound: 0,
    };
  });
}

const medianOf = (ms: Measurement[]): Measurement =>
  Object.fromEntries(
    Object.keys(ms[0]!).map((k) => [k, median(ms.map((m) => m[k as keyof Measurement]))]),
  ) as unknown as Measurement;

const configs: Config[] = [
  { name: "APO, memory store", parallelSteps: 4, store: "memory", latencyMs: 0 },
  { name: "APO, SQLite store", parallelSteps: 4, store: "sqlite", latencyMs: 0 },
  { name: "APO, memory store, 20 ms LLM latency", parallelSteps: 4, store: "memory", latencyMs: 20 },
  {
    name: "APO, memory store, 20 ms LLM latency, one step at a time",
    parallelSteps: 1,
    store: "memory",
    latencyMs: 20,
  },
];

// One unmeasured run first, so JIT warm-up does not land on the first row.
await runApo(configs[0]!, 0);
const rows: Array<{ name: string; runs: Measurement[]; median: Measurement }> = [];
for (const config of configs) {
  const runs: Measurement[] = [];
  for (let seed = 1; seed <= REPEATS; seed++) runs.push(await runApo(config, seed));
  rows.push({ name: config.name, runs, median: medianOf(runs) });
  const m = rows.at(-1)!.median;
  console.log(
    `${config.name}: ${m.rolloutsPerS.toFixed(0)} rollouts/s, ${m.optimizerCallsPerRound} optimiser calls/round, overhead ${m.overheadMsPerRound.toFixed(0)} ms/round`,
  );
}
const controlRollouts = Math.round(rows[0]!.median.rollouts);
for (const latencyMs of [0, 20]) {
  const control: Measurement[] = [];
  for (let i = 0; i < REPEATS; i++) control.push(await runBaseline(controlRollouts, latencyMs));
  const name = `control: Baseline, the same ${controlRollouts} rollouts, memory store${latencyMs ? `, ${latencyMs} ms LLM latency` : ""}`;
  rows.push({ name, runs: control, median: medianOf(control) });
  console.log(`${name}: ${rows.at(-1)!.median.rolloutsPerS.toFixed(0)} rollouts/s`);
}

const summary = {
  date: new Date().toISOString(),
  node: process.version,
  cpus: cpus().length,
  repeats: REPEATS,
  rounds: ROUNDS,
  trainTasks: train.length,
  valTasks: val.length,
  apoOptions: "beamWidth 4, branchFactor 4, gradientBatchSize 4, valBatchSize 16, initial validation on",
  runners: "2 in-process runners x 8 concurrent rollouts",
  rows,
  loadAverage: loadavg(),
};
writeFileSync(join(here, "results", "apo.json"), `${JSON.stringify(summary, null, 2)}\n`);
const f = (x: number, d = 0) =>
  x.toLocaleString("en-US", { maximumFractionDigits: d, minimumFractionDigits: d });
const md = [
  "# APO benchmark",
  "",
  `${summary.date}, Node ${summary.node}, ${summary.cpus} CPUs. Command: \`pnpm exec tsx bench/apo.ts\` (REPEATS=${REPEATS}, ROUNDS=${ROUNDS}).`,
  `examples/apo-agent's agent; its model, the critic and the editor are the loopback mock server (the editor returns a new valid prompt every call).`,
  `APO: ${summary.apoOptions}; ${summary.runners}; ${train.length} training and ${val.length} validation tasks. Median of ${REPEATS} runs (APO seeds 1..${REPEATS}).`,
  "",
  `Load average at the end: ${summary.loadAverage.map((x) => x.toFixed(1)).join(" / ")} (shared machine).`,
  "",
  "| configuration | rollouts | wall s | rollouts/s | cpu s | cpu ms / rollout | optimiser calls / round | candidates / round | round wall s | APO overhead ms / round | overhead ms / rollout |",
  "|---|---|---|---|---|---|---|---|---|---|---|",
  ...rows.map(
    ({ name, median: m }) =>
      `| ${name} | ${f(m.rollouts)} | ${f(m.wallS, 2)} | ${f(m.rolloutsPerS)} | ${f(m.cpuS, 2)} | ${f(m.cpuMsPerRollout, 2)} | ${f(m.optimizerCallsPerRound)} | ${f(m.candidatesPerRound)} | ${f(m.roundWallS, 2)} | ${f(m.overheadMsPerRound)} | ${f(m.overheadMsPerRollout, 2)} |`,
  ),
  "",
  "Overhead = a round's wall time minus the time APO waited on optimiser calls or rollouts (overlaps counted once),",
  "i.e. APO's own work: enqueueing, store writes of versions/records/scores, reading spans and turning them into",
  "conversations for the critic, selection. The control runs the same number of rollouts with no optimisation,",
  "so rollouts/s of APO against the control shows what the optimisation loop costs in throughput.",
  "CPU time is this process's user+system time for the whole run (runners, agent, mock server and APO all run in it);",
  "unlike wall time it does not grow with other processes' load, so cpu ms / rollout against the control is the robust",
  `measure of APO's cost: ${f(rows[0]!.median.cpuMsPerRollout, 2)} vs ${f(rows[rows.length - 2]!.median.cpuMsPerRollout, 2)} ms per rollout (memory store, no latency), ` +
    `${f(rows[0]!.median.cpuMsPerRollout / rows[rows.length - 2]!.median.cpuMsPerRollout, 2)}x.`,
  "",
].join("\n");
writeFileSync(join(here, "results", "apo.md"), md);
console.log("\nwrote bench/results/apo.{json,md}");
