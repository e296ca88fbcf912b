/**
 * Worker-thread parallelism (issue 13): the calc-agent's policy (PolicyModel d64, 2 layers, 4 heads,
 * context 160, character vocabulary) trained and sampled in this thread vs on a pool of 1 and 2 worker
 * threads (`startPolicyWorkers`), each with its own single-threaded wasm instance. Measures, in one run
 * and in interleaved rounds (best of the rounds): an SFT step (batch 32, ~130-token transcripts), a PPO
 * actor update (128 rows) and 128 concurrent chat requests through the OpenAI-compatible PolicyServer.
 * Writes bench/results/parallel.{json,md}.
 *
 *   pnpm exec tsx bench/parallel.ts
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  AdamW,
  ChatTemplate,
  type PolicyBundle,
  PolicyModel,
  type PolicyWorkers,
  type RowTensors,
  runActorUpdate,
  SeededRandom,
  type ServeFn,
  type SftExample,
  selectBackend,
  servePolicy,
  sft,
  startPolicyWorkers,
  Tokenizer,
  type TrainRow,
} from "@agl/trainer-gpu";
import OpenAI from "openai";
import { actorOptions } from "../packages/trainer-gpu/src/ppo/test-support/actor-options.js";

const here = dirname(fileURLToPath(import.meta.url));
const ROUNDS = 3;

const tokenizer = new Tokenizer({
  chars: `\n 0123456789+-*/=()?.,:"{}[]_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ`,
});
const template = new ChatTemplate(tokenizer);
const newModel = () =>
  PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 64,
    nLayers: 2,
    nHeads: 4,
    contextLength: 160,
    seed: 1,
  });

/** Calc-agent-like transcripts of ~130 tokens: a question, a tool call, its result, the answer. */
function transcripts(n: number): SftExample[] {
  const rng = new SeededRandom(2);
  return Array.from({ length: n }, () => {
    const a = rng.int(9000) + 100;
    const b = rng.int(9000) + 100;
    return {
      messages: [
        { role: "user", content: `What is ${a} * ${b}?` },
        {
          role: "assistant",
          content: `<tool_call>{"name":"calc","arguments":{"expr":"${a}*${b}"}}</tool_call>`,
        },
        { role: "tool", content: String(a * b) },
        { role: "assistant", content: `The answer is ${a * b}.` },
      ],
    };
  });
}

/** 128 PPO rows shaped like the calc-agent's (prompt ~70 tokens, response ~40). */
function actorBatch(): { rows: TrainRow[]; inputs: RowTensors[] } {
  const rng = new SeededRandom(3);
  const V = tokenizer.vocabSize;
  const rows: TrainRow[] = Array.from({ length: 128 }, (_, i) => {
    const promptIds = Array.from({ length: 60 + rng.int(20) }, () => 11 + rng.int(V - 11));
    const responseIds = Array.from({ length: 25 + rng.int(30) }, () => 11 + rng.int(V - 11));
    return {
      rolloutId: `r${i}`,
      uid: `u${i >> 3}`,
      score: rng.int(2),
      promptIds,
      responseIds,
      responseMask: responseIds.map(() => 1),
      rolloutLogprobs: null,
      isDrop: false,
      responseTruncated: false,
    };
  });
  const inputs = rows.map((r) => ({
    advantages: r.responseIds.map(() => (r.score ? 1 : -1)),
    oldLogprobs: null,
    refLogprobs: null,
    tisWeights: null,
  }));
  return { rows, inputs };
}

interface Setup {
  name: string;
  workers: number;
  policy: PolicyBundle;
  pool: PolicyWorkers | undefined;
  optimizer: AdamW;
  serve: ServeFn;
}

/** Wall and CPU seconds (all threads of this process: main + workers) of one measurement. */
interface Cost {
  wall: number;
  cpu: number;
}

const cpuSeconds = () => {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1e6;
};

async function measure(fn: () => Promise<unknown>): Promise<Cost> {
  const c0 = cpuSeconds();
  const t0 = performance.now();
  await fn();
  return { wall: (performance.now() - t0) / 1000, cpu: cpuSeconds() - c0 };
}

const better = (a: Cost, b: Cost) => (b.wall < a.wall ? b : a);

async function sftStep(s: Setup, data: SftExample[]): Promise<Cost> {
  const steps: Cost[] = [];
  let last = { wall: performance.now() / 1000, cpu: cpuSeconds() };
  await sft(s.policy.model, data, {
    template,
    steps: 3,
    batchSize: 32,
    progress: false,
    workers: s.pool,
    onStep: () => {
      const now = { wall: performance.now() / 1000, cpu: cpuSeconds() };
      steps.push({ wall: now.wall - last.wall, cpu: now.cpu - last.cpu });
      last = now;
    },
  });
  // The first step also encodes the data set: not a step's cost.
  return steps.slice(1).reduce(better);
}

function actorUpdate(s: Setup, batch: ReturnType<typeof actorBatch>): Promise<Cost> {
  return measure(() =>
    runActorUpdate(
      { policy: s.policy.model, optimizer: s.optimizer, workers: s.pool },
      batch.rows,
      batch.inputs,
      actorOptions({ miniBatchRows: 128, microBatchRows: 128, clipHigh: 0.28, lr: () => 1e-6 }),
    ),
  );
}

async function generation(s: Setup, round: number): Promise<{ cost: Cost; tokens: number }> {
  const server = await s.serve(s.policy, { modelName: "policy" });
  try {
    const client = new OpenAI({ baseURL: server.url, apiKey: "bench", maxRetries: 0 });
    const ask = (seed: number, n: number) =>
      client.chat.completions.create({
        model: "policy",
        messages: [{ role: "user", content: `What is ${seed} * 37? Use the calculator tool, then answer.` }],
        max_tokens: n,
        seed,
        temperature: 1,
        ignore_eos: true,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    await Promise.all(Array.from({ length: 128 }, (_, i) => ask(i, 4)));
    let tokens = 0;
    const cost = await measure(async () => {
      const results = await Promise.all(Array.from({ length: 128 }, (_, i) => ask(1000 * round + i, 48)));
      tokens = results.reduce((a, r) => a + (r.usage?.completion_tokens ?? 0), 0);
    });
    return { cost, tokens };
  } finally {
    await server.close();
  }
}

async function main() {
  const selection = await selectBackend({ backend: process.env.AGL_TF_BACKEND ?? "wasm" });
  const load = loadavg()[0] ?? 0;
  console.log(`backend ${selection.label}; ${cpus().length} cores; load average ${load.toFixed(2)}`);
  const setups: Setup[] = [];
  for (const workers of [0, 1, 2]) {
    const policy = { model: newModel(), tokenizer, template };
    const pool = workers ? await startPolicyWorkers(policy, { workers }) : undefined;
    setups.push({
      name: workers ? `${workers} worker${workers > 1 ? "s" : ""}` : "this thread (serial)",
      workers,
      policy,
      pool,
      optimizer: new AdamW(policy.model.trainableVariables, {
        betas: [0.9, 0.999],
        eps: 1e-8,
        weightDecay: 0,
      }),
      serve: pool ? pool.serve : servePolicy,
    });
  }
  const data = transcripts(256);
  const lengths = data.map(
    (d) => template.encodeChat(d.messages, null, { addGenerationPrompt: false }).ids.length,
  );
  const meanLen = lengths.reduce((a, b) => a + b, 0) / lengths.length;
  const batch = actorBatch();
  const worst: Cost = { wall: Number.POSITIVE_INFINITY, cpu: 0 };
  const best = setups.map(() => ({ sft: worst, actor: worst, gen: worst, genTokens: 0 }));
  for (let round = 1; round <= ROUNDS; round++) {
    for (const [i, s] of setups.entries()) {
      const b = best[i]!;
      b.sft = better(b.sft, await sftStep(s, data));
      b.actor = better(b.actor, await actorUpdate(s, batch));
      const g = await generation(s, round);
      if (g.cost.wall < b.gen.wall) {
        b.gen = g.cost;
        b.genTokens = g.tokens;
      }
      console.log(
        `round ${round} ${s.name}: sft ${b.sft.wall.toFixed(3)} s/step, actor ${b.actor.wall.toFixed(3)} s, generation ${b.gen.wall.toFixed(2)} s (${b.genTokens} tokens)`,
      );
    }
  }
  const serial = best[0]!;
  const rows = setups.map((s, i) => {
    const b = best[i]!;
    return {
      setup: s.name,
      workers: s.workers,
      sftSecondsPerStep: b.sft.wall,
      sftCpuSecondsPerStep: b.sft.cpu,
      sftSpeedup: serial.sft.wall / b.sft.wall,
      actorUpdateSeconds: b.actor.wall,
      actorUpdateCpuSeconds: b.actor.cpu,
      actorSpeedup: serial.actor.wall / b.actor.wall,
      generationSeconds: b.gen.wall,
      generationCpuSeconds: b.gen.cpu,
      generationTokensPerSecond: b.genTokens / b.gen.wall,
      generationSpeedup: serial.gen.wall / b.gen.wall,
    };
  });
  for (const s of setups) await s.pool?.close();
  const result = {
    date: new Date().toISOString(),
    backend: selection.backend,
    cores: cpus().length,
    loadAverage1mAtStart: load,
    loadAverage1mAtEnd: loadavg()[0],
    model: { dModel: 64, nLayers: 2, nHeads: 4, contextLength: 160, vocabSize: tokenizer.vocabSize },
    sft: { batchSize: 32, meanSequenceTokens: meanLen },
    actor: { rows: 128, miniBatchRows: 128, microBatchRows: "128 (serial, 1 worker), 64 (2 workers)" },
    generation: { concurrentRequests: 128, maxTokens: 48 },
    rounds: ROUNDS,
    results: rows,
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, "results", "parallel.json"), `${JSON.stringify(result, null, 2)}\n`);
  const md = [
    "# Worker threads: both cores",
    "",
    `Backend **${selection.backend}**, ${cpus().length} cores, 1-min load average ${load.toFixed(2)} at start and ${(loadavg()[0] ?? 0).toFixed(2)} at the end (the machine is shared: another process using a core caps what 2 workers can gain). The calc-agent's policy: PolicyModel d64, 2 layers, 4 heads, context 160, vocabulary ${tokenizer.vocabSize}. Each setup has its own copy of the model; the setups run in ${ROUNDS} interleaved rounds, best of the rounds.`,
    "",
    `- **SFT step**: batch 32 transcripts (mean ${meanLen.toFixed(0)} tokens), forward + backward + Adam; with workers one micro-batch per worker, gradients summed in the main thread, weights broadcast after the step.`,
    "- **PPO actor update**: 128 rows (prompt ~70, response ~40 tokens), one mini-batch; serial = one micro-batch of 128 (the calc-agent's setting), 2 workers = two of 64.",
    "- **Generation**: 128 concurrent non-streaming chat requests (the real `openai` SDK) to one PolicyServer on loopback, 48 tokens each; serial = the in-process Generator, workers = `workers.serve` (PooledGenerator).",
    "",
    "Wall seconds (best round), the speed-up over this thread, and the CPU seconds the whole process (main thread + workers) spent in that measurement — what the parallel version costs in total; wall < CPU means the cores overlapped.",
    "",
    "| setup | SFT s/step | speed-up | CPU s | actor update s | speed-up | CPU s | generation s | tokens/s | speed-up | CPU s |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...rows.map(
      (r) =>
        `| ${r.setup} | ${r.sftSecondsPerStep.toFixed(3)} | ${r.sftSpeedup.toFixed(2)}x | ${r.sftCpuSecondsPerStep.toFixed(2)} | ${r.actorUpdateSeconds.toFixed(3)} | ${r.actorSpeedup.toFixed(2)}x | ${r.actorUpdateCpuSeconds.toFixed(2)} | ${r.generationSeconds.toFixed(2)} | ${r.generationTokensPerSecond.toFixed(0)} | ${r.generationSpeedup.toFixed(2)}x | ${r.generationCpuSeconds.toFixed(2)} |`,
    ),
    "",
  ].join("\n");
  writeFileSync(join(here, "results", "parallel.md"), md);
  console.log(md);
}

await main();
