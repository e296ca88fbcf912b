/**
 * Batched generation of a Hugging Face model (issue 28 item 3): tokens/s of 16 concurrent requests vs 1
 * through the Generator, on bench/pretrained.ts's checkpoint shape (qwen2, d=256, 4 layers, vocab 2048,
 * LoRA r=16), 32-token prompts, 32 new tokens per request. Two workloads: the 16 requests share one prompt
 * (the `n` choices of a request, a GRPO group: prefilled once) and 16 distinct prompts (nothing shared).
 * Interleaved rounds in one run, median; wall and CPU time (the machine is shared). Writes
 * bench/results/generation-batching.{json,md}.
 *
 *   pnpm exec tsx bench/generation-batching.ts [--quick]
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Generator, selectBackend, Tokenizer } from "@agl/trainer-gpu";
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
const promptOf = (k: number) => Array.from({ length: 32 }, (_, i) => 11 + ((i * 13 + k * 101) % 2000));

async function measure(concurrency: number, distinct: boolean) {
  const gen = new Generator(model, tokenizer, { maxBatchSize: 64, prefixCache: false });
  await gen.generate({ promptIds: promptOf(999), maxTokens: 4, ignoreEos: true, seed: 0 });
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const out = await Promise.all(
    Array.from({ length: concurrency }, (_, i) =>
      gen.generate({
        promptIds: promptOf(distinct ? i : 0),
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
  { name: "16 requests, one shared prompt (n choices)", distinct: false },
  { name: "16 requests, distinct prompts", distinct: true },
];
const rows = [];
for (const c of cases) {
  const one: Array<Awaited<ReturnType<typeof measure>>> = [];
  const many: Array<Awaited<ReturnType<typeof measure>>> = [];
  for (let r = 0; r < ROUNDS; r++) {
    one.push(await measure(1, c.distinct));
    many.push(await measure(16, c.distinct));
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
  "Model: qwen2, d=256, 4 layers, 4/2 heads, vocab 2048, LoRA r=16 (bench/pretrained.ts's shape); 32-token prompts, 32 new tokens each; prefix cache off.",
  "",
  "| workload | 1 request tok/s | 16 requests tok/s | ratio (wall) | ratio (per CPU second) |",
  "|---|---:|---:|---:|---:|",
  ...rows.map(
    (r) =>
      `| ${r.name} | ${r.one.tokensPerS.toFixed(0)} | ${r.sixteen.tokensPerS.toFixed(0)} | ${r.ratioWall.toFixed(1)}x | ${r.ratioCpu.toFixed(1)}x |`,
  ),
  "",
];
writeFileSync(join(here, "results", "generation-batching.md"), md.join("\n"));
console.log(md.join("\n"));
model.dispose();
