/**
 * Policy benchmark (issue 6): training-step throughput and model-FLOPs utilisation against the backend's
 * own large-matmul throughput measured in the same run, and generation throughput of the dynamic-batching
 * engine at 1, 8 and 32 concurrent requests. Writes bench/results/policy.{json,md}.
 *
 *   pnpm exec tsx bench/policy.ts            (AGL_TF_BACKEND=cpu|wasm|tensorflow to force a backend)
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  ChatTemplate,
  Generator,
  maskedNll,
  PolicyModel,
  PolicyServer,
  selectBackend,
  Tokenizer,
  tf,
} from "@agl/trainer-gpu";
import OpenAI from "openai";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");

/** Best-of-n wall time: on a shared machine the minimum is the least disturbed measurement. */
async function timeIt(fn: () => void | Promise<void>, reps: number, warmup = 2): Promise<number> {
  for (let i = 0; i < warmup; i++) await fn();
  const times: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    times.push(performance.now() - t0);
  }
  return Math.min(...times);
}

/** Dense float32 matmul GFLOP/s of the active backend for an n x n product (best of `reps`). */
async function matmulGflops(n: number, reps: number): Promise<number> {
  const a = tf.randomNormal([n, n]);
  const b = tf.randomNormal([n, n]);
  const ms = await timeIt(
    () => {
      const c = tf.matMul(a, b);
      c.dataSync();
      c.dispose();
    },
    reps,
    1,
  );
  tf.dispose([a, b]);
  return (2 * n ** 3) / (ms / 1000) / 1e9;
}

interface TrainCase {
  name: string;
  dModel: number;
  nLayers: number;
  nHeads: number;
  batch: number;
  seqLen: number;
}

/**
 * Training-step throughput, interleaved with matmul-peak samples: the machine is shared, so both are
 * sampled in alternating rounds and the best (least disturbed) of each is kept.
 */
async function trainStep(c: TrainCase, vocab: number, rounds: number) {
  const model = PolicyModel.create({
    vocabSize: vocab,
    dModel: c.dModel,
    nLayers: c.nLayers,
    nHeads: c.nHeads,
    contextLength: c.seqLen,
    seed: 1,
  });
  const ids = Array.from({ length: c.batch }, (_, b) =>
    Array.from({ length: c.seqLen }, (_, t) => (b * 31 + t * 7) % vocab),
  );
  const mask = ids.map((r) => r.map(() => 1));
  const opt = tf.train.adam(1e-3);
  const step = () => {
    const loss = opt.minimize(() => maskedNll(model, ids, mask), true, model.trainableVariables);
    loss?.dataSync();
    loss?.dispose();
  };
  step();
  step();
  let ms = Number.POSITIVE_INFINITY;
  let peak = 0;
  for (let r = 0; r < rounds; r++) {
    peak = Math.max(peak, await matmulGflops(512, 2), await matmulGflops(1024, 1));
    ms = Math.min(ms, await timeIt(step, 1, 0));
  }
  const tokens = c.batch * c.seqLen;
  // PaLM-style model FLOPs per token: 6 x dense parameters + 12 x layers x width x sequence (attention).
  const flopsPerToken = 6 * model.matmulParameterCount + 12 * c.nLayers * c.dModel * c.seqLen;
  const gflops = (flopsPerToken * tokens) / (ms / 1000) / 1e9;
  const result = {
    ...c,
    parameters: model.parameterCount,
    msPerStep: ms,
    tokensPerSecond: tokens / (ms / 1000),
    modelGflops: gflops,
    matmulPeakGflops: peak,
  };
  model.dispose();
  opt.dispose();
  return result;
}

function genModel(vocab: number) {
  return PolicyModel.create({
    vocabSize: vocab,
    dModel: 64,
    nLayers: 2,
    nHeads: 4,
    contextLength: 256,
    seed: 2,
  });
}

/** Engine throughput: `concurrency` requests submitted together to the Generator. */
async function generation(vocab: number, concurrency: number, maxTokens: number) {
  const model = genModel(vocab);
  const tok = new Tokenizer();
  const gen = new Generator(model, tok, { maxBatchSize: 64 });
  const prompt = new ChatTemplate(tok).encodeChat([
    { role: "user", content: "What is 12 + 30? Use the calculator." },
  ]).ids;
  // Warm-up (kernel compilation, allocator).
  await Promise.all(
    Array.from({ length: Math.min(concurrency, 4) }, (_, i) =>
      gen.generate({ promptIds: prompt, seed: i, maxTokens: 8, ignoreEos: true }),
    ),
  );
  const t0 = performance.now();
  const stepsBefore = gen.steps;
  const results = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      gen.generate({ promptIds: prompt, seed: 100 + i, maxTokens, ignoreEos: true }),
    ),
  );
  const s = (performance.now() - t0) / 1000;
  const tokens = results.reduce((a, r) => a + r.tokenIds.length, 0);
  model.dispose();
  return {
    concurrency,
    promptTokens: prompt.length,
    tokens,
    seconds: s,
    tokensPerSecond: tokens / s,
    decodeSteps: gen.steps - stepsBefore,
  };
}

/** End-to-end throughput: concurrent OpenAI SDK chat requests against a PolicyServer on loopback. */
async function httpGeneration(vocab: number, concurrency: number, maxTokens: number) {
  const model = genModel(vocab);
  const tok = new Tokenizer();
  const server = new PolicyServer({ model, tokenizer: tok });
  await server.start();
  const client = new OpenAI({ baseURL: server.baseUrl, apiKey: "bench", maxRetries: 0 });
  const ask = (seed: number, n: number) =>
    client.chat.completions.create({
      model: "agl-policy",
      messages: [{ role: "user", content: "What is 12 + 30? Use the calculator." }],
      max_tokens: n,
      seed,
      ignore_eos: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
  // Warm-up with the full concurrency so the client's keep-alive connections exist (steady state).
  await Promise.all(Array.from({ length: concurrency }, (_, i) => ask(i, 8)));
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: concurrency }, (_, i) => ask(100 + i, maxTokens)));
  const s = (performance.now() - t0) / 1000;
  const tokens = results.reduce((a, r) => a + (r.usage?.completion_tokens ?? 0), 0);
  await server.stop();
  model.dispose();
  return { concurrency, tokens, seconds: s, tokensPerSecond: tokens / s };
}

async function main() {
  const selection = await selectBackend();
  const vocab = new Tokenizer().vocabSize;
  const load = loadavg()[0];
  console.log(`backend ${selection.label}; ${cpus().length} cores; load average ${load?.toFixed(2)}`);

  const cases: TrainCase[] = [
    { name: "d64 L2 H4 T64 B32", dModel: 64, nLayers: 2, nHeads: 4, batch: 32, seqLen: 64 },
    { name: "d128 L2 H4 T64 B32", dModel: 128, nLayers: 2, nHeads: 4, batch: 32, seqLen: 64 },
    { name: "d256 L2 H4 T64 B32", dModel: 256, nLayers: 2, nHeads: 4, batch: 32, seqLen: 64 },
  ];
  const measured = [];
  let peak = Math.max(await matmulGflops(512, 4), await matmulGflops(1024, 3));
  for (const c of cases) {
    const r = await trainStep(c, vocab, quick ? 3 : 8);
    measured.push(r);
    peak = Math.max(peak, r.matmulPeakGflops);
  }
  peak = Math.max(peak, await matmulGflops(512, 4), await matmulGflops(1024, 3));
  // MFU against the best matmul throughput seen anywhere in the run: a contended peak sample can then
  // not inflate the utilisation.
  const training = measured.map((r) => ({ ...r, mfu: r.modelGflops / peak }));
  for (const r of training) {
    console.log(
      `train ${r.name}: ${r.msPerStep.toFixed(0)} ms/step, ${r.tokensPerSecond.toFixed(0)} tok/s, ${r.modelGflops.toFixed(2)} model GFLOP/s, MFU ${(100 * r.mfu).toFixed(1)}% of ${peak.toFixed(1)} GFLOP/s`,
    );
  }

  const maxTokens = quick ? 32 : 64;
  const gen = [];
  const bestOf = async <T extends { tokensPerSecond: number }>(
    runs: number,
    f: () => Promise<T>,
  ): Promise<T> => {
    let best: T | undefined;
    for (let i = 0; i < runs; i++) {
      const r = await f();
      if (!best || r.tokensPerSecond > best.tokensPerSecond) best = r;
    }
    return best as T;
  };
  for (const n of [1, 8, 32]) {
    const r = await bestOf(5, () => generation(vocab, n, maxTokens));
    gen.push(r);
    console.log(
      `generate x${n}: ${r.tokensPerSecond.toFixed(0)} tok/s (${r.tokens} tokens in ${r.seconds.toFixed(2)} s, ${r.decodeSteps} steps)`,
    );
  }
  const http = [];
  for (const n of [1, 8, 32]) {
    const r = await bestOf(3, () => httpGeneration(vocab, n, maxTokens));
    http.push(r);
    console.log(
      `http x${n}: ${r.tokensPerSecond.toFixed(0)} tok/s (${r.tokens} tokens in ${r.seconds.toFixed(2)} s)`,
    );
  }
  const single = gen[0]?.tokensPerSecond ?? 1;
  const httpSingle = http[0]?.tokensPerSecond ?? 1;
  const speedup32 = (gen[2]?.tokensPerSecond ?? 0) / single;
  const bestMfu = Math.max(...training.map((t) => t.mfu));

  const result = {
    date: new Date().toISOString(),
    backend: selection.backend,
    tfBackend: selection.tfBackend,
    device: selection.device,
    backendLabel: selection.label,
    skipped: selection.skipped,
    cores: cpus().length,
    loadAverage1m: load,
    matmulPeakGflops: peak,
    training,
    generation: gen,
    generationSpeedup32vs1: speedup32,
    http,
    httpSpeedup32vs1: (http[2]?.tokensPerSecond ?? 0) / httpSingle,
    targets: {
      mfuAtLeast: 0.4,
      bestMfu,
      mfuMet: bestMfu >= 0.4,
      speedup32AtLeast: 5,
      speedupMet: speedup32 >= 5,
    },
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, "results", "policy.json"), `${JSON.stringify(result, null, 2)}\n`);
  const md = [
    "# Policy model benchmark",
    "",
    `Backend **${selection.label}** (${selection.skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ") || "first choice"}), ${cpus().length} cores, 1-min load average ${load?.toFixed(2)} at start (the machine is shared, so absolute numbers vary; ratios are measured within one run).`,
    "",
    `Best large-matmul throughput of the backend in this run (512 and 1024 square, sampled at the start, the end, and in rounds interleaved with each training case): **${peak.toFixed(1)} GFLOP/s**.`,
    "",
    "## Training step (forward + backward + Adam, masked cross-entropy)",
    "",
    "Model FLOPs per token = 6 x dense parameters + 12 x layers x width x sequence length; MFU = model FLOP/s of the best step / the best matmul throughput of the whole run. Times are best-of (least disturbed by other processes sharing the machine).",
    "",
    "| config | params | ms/step | tokens/s | model GFLOP/s | MFU |",
    "|---|---:|---:|---:|---:|---:|",
    ...training.map(
      (t) =>
        `| ${t.name} | ${t.parameters.toLocaleString("en")} | ${t.msPerStep.toFixed(0)} | ${t.tokensPerSecond.toFixed(0)} | ${t.modelGflops.toFixed(2)} | ${(100 * t.mfu).toFixed(1)}% |`,
    ),
    "",
    `Target: MFU >= 40% on WASM: best ${(100 * bestMfu).toFixed(1)}% (${bestMfu >= 0.4 ? "met" : "not met"}).`,
    "",
    `## Generation (d64 L2 H4, KV cache, dynamic batching; chat prompt of ${gen[0]?.promptTokens} tokens, ${maxTokens} new tokens per request)`,
    "",
    "| concurrent requests | tokens/s | decode steps | speed-up vs 1 |",
    "|---:|---:|---:|---:|",
    ...gen.map(
      (g) =>
        `| ${g.concurrency} | ${g.tokensPerSecond.toFixed(0)} | ${g.decodeSteps} | ${(g.tokensPerSecond / single).toFixed(1)}x |`,
    ),
    "",
    `Target: 32 concurrent >= 5x single: ${speedup32.toFixed(1)}x (${speedup32 >= 5 ? "met" : "not met"}).`,
    "",
    "Through HTTP (the real `openai` SDK against `PolicyServer` on loopback, non-streaming chat):",
    "",
    "| concurrent requests | tokens/s | speed-up vs 1 |",
    "|---:|---:|---:|",
    ...http.map(
      (g) =>
        `| ${g.concurrency} | ${g.tokensPerSecond.toFixed(0)} | ${(g.tokensPerSecond / httpSingle).toFixed(1)}x |`,
    ),
    "",
  ].join("\n");
  writeFileSync(join(here, "results", "policy.md"), md);
  console.log(`wrote bench/results/policy.{json,md}`);
}

await main();
