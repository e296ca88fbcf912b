/**
 * Batched generation of a Hugging Face model (issue 28 item 3): tokens/s of 16 concurrent requests vs 1
 * through the Generator, on bench/pretrained.ts's checkpoint shape (qwen2, d=256, 4 layers, vocab 2048,
 * LoRA r=16), 32-token prompts, 32 new tokens per request. Two workloads: the 16 requests share one prompt
 * (the `n` choices of a request, a GRPO group: prefilled once) and 16 distinct prompts (nothing shared).
 * Interleaved rounds in one run, median; wall and CPU time (the machine is shared). Two engines: the
 * in-thread Generator (one core), and PooledGenerator over a pool of 2 worker threads (PolicyWorkers, as
 * `PolicyServer` runs with `workers: 2`, the calc-agent job's default): each request goes to the least-loaded
 * worker, so 16 requests use both cores where 1 uses one. Each engine's ratio is its own 16 vs its own 1.
 * Prompts differ in every measurement (a salt), so the workers' prefix caches never carry a prompt from one
 * measurement to the next. Writes bench/results/generation-batching.{json,md}.
 *
 *   pnpm exec tsx bench/generation-batching.ts [--quick]
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type GenerateRequest,
  Generator,
  PooledGenerator,
  selectBackend,
  startPolicyWorkers,
  Tokenizer,
} from "@agl/trainer-gpu";
import { generationBenchModel } from "./support/generation-model.js";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");
const ROUNDS = quick ? 1 : 5;
const MAX_TOKENS = 32;
const backend = (await selectBackend({ log: () => {} })).label;
const tokenizer = new Tokenizer({
  chars: Array.from({ length: 2048 - 11 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join(""),
});
const model = generationBenchModel();
let salt = 0;
const promptOf = (k: number, s: number) =>
  Array.from({ length: 32 }, (_, i) => 11 + ((i * 13 + k * 101 + s * 7919) % 2000));
const pool = await startPolicyWorkers({ model, tokenizer }, { workers: 2, maxBatchSize: 64 });
type Generate = (request: GenerateRequest) => Promise<{ tokenIds: number[] }>;
const engines: Record<"thread" | "pool", () => Generate> = {
  thread: () => {
    const gen = new Generator(model, tokenizer, { maxBatchSize: 64, prefixCache: false });
    return (r) => gen.generate(r);
  },
  pool: () => {
    const gen = new PooledGenerator(pool);
    return async (r) => (await gen.generateMany([r]))[0]!;
  },
};

/** Tokens/s of `concurrency` requests at once on a fresh engine; process CPU covers the worker threads too. */
async function measure(engine: keyof typeof engines, concurrency: number, distinct: boolean) {
  const generate = engines[engine]();
  const s = ++salt;
  await Promise.all(
    Array.from({ length: engine === "pool" ? 2 : 1 }, (_, w) =>
      generate({ promptIds: promptOf(999 + w, s), maxTokens: 4, ignoreEos: true, seed: 0 }),
    ),
  );
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const out = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      generate({
        promptIds: promptOf(distinct ? i : 0, s),
        maxTokens: MAX_TOKENS,
        ignoreEos: true,
        seed: 10 + i,
      }),
    ),
  );
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(c0);
  const tokens = out.reduce((n, r) => n + r.tokenIds.length, 0);
  return { tokensPerS: tokens / wall, tokensPerCpuS: tokens / ((c.user + c.system) / 1e6) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const loadBefore = loadavg();
const cases = [
  { name: "16 requests, one shared prompt", engine: "thread", distinct: false },
  { name: "16 requests, distinct prompts", engine: "thread", distinct: true },
  { name: "16 requests, one shared prompt", engine: "pool", distinct: false },
  { name: "16 requests, distinct prompts", engine: "pool", distinct: true },
] as const;
const rows = [];
for (const c of cases) {
  const one: Array<Awaited<ReturnType<typeof measure>>> = [];
  const many: Array<Awaited<ReturnType<typeof measure>>> = [];
  for (let r = 0; r < ROUNDS; r++) {
    one.push(await measure(c.engine, 1, c.distinct));
    many.push(await measure(c.engine, 16, c.distinct));
  }
  const s = (xs: typeof one) => ({
    tokensPerS: median(xs.map((x) => x.tokensPerS)),
    tokensPerCpuS: median(xs.map((x) => x.tokensPerCpuS)),
  });
  const a = s(one);
  const b = s(many);
  rows.push({
    ...c,
    one: a,
    sixteen: b,
    ratioWall: b.tokensPerS / a.tokensPerS,
    ratioCpu: b.tokensPerCpuS / a.tokensPerCpuS,
  });
}
const loadAfter = loadavg();
const results = {
  date: new Date().toISOString(),
  backend,
  cpus: cpus().length,
  loadavg: { before: loadBefore, after: loadAfter },
  rounds: ROUNDS,
  maxTokens: MAX_TOKENS,
  rows,
};
writeFileSync(join(here, "results", "generation-batching.json"), `${JSON.stringify(results, null, 2)}\n`);
const md = [
  "# Batched generation, 16 concurrent requests vs 1 (bench/generation-batching.ts)",
  "",
  `${results.date}, backend ${backend}, ${results.cpus} cores, load average ${loadBefore.map((x) => x.toFixed(2)).join(" ")} before / ${loadAfter.map((x) => x.toFixed(2)).join(" ")} after; median of ${ROUNDS} interleaved rounds.`,
  "Model: qwen2, d=256, 4 layers, 4/2 heads, vocab 2048, LoRA r=16 (bench/pretrained.ts's shape); 32-token prompts, 32 new tokens each; the thread engine's prefix cache off.",
  "",
  "Engines: `thread` = the in-thread Generator (one core); `pool` = PooledGenerator on 2 worker threads (each request to the least-loaded worker; the workers' Generators keep their default prefix cache, prompts never repeat across measurements).",
  "",
  "| engine | workload | 1 request tok/s | 16 requests tok/s | ratio (wall) | ratio (per CPU second) |",
  "|---|---|---:|---:|---:|---:|",
  ...rows.map(
    (r) =>
      `| ${r.engine} | ${r.name} | ${r.one.tokensPerS.toFixed(0)} | ${r.sixteen.tokensPerS.toFixed(0)} | ${r.ratioWall.toFixed(1)}x | ${r.ratioCpu.toFixed(1)}x |`,
  ),
  "",
];
writeFileSync(join(here, "results", "generation-batching.md"), md.join("\n"));
console.log(md.join("\n"));
await pool.close();
model.dispose();
