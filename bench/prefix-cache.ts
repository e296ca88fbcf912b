/**
 * Prefix caching in generation (issue 24): requests that share calc-agent-qwen3's ~150-token tool
 * preamble, served by the Generator with its prefix cache on and off, interleaved in one run. The model is
 * the job's Qwen3 shape (d=64, 2 layers, tied head). Measured: time to first token of requests sent one
 * after another (the prefill the cache saves), and end-to-end throughput of 16 concurrent requests of 32
 * tokens after a warm-up request. Writes bench/results/prefix-cache.{json,md}.
 *
 *   pnpm exec tsx bench/prefix-cache.ts [--quick]
 */
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Generator, PretrainedModel, selectBackend, Tokenizer } from "@agl/trainer-gpu";
import { qwen3JobArch, tokenStream } from "./support/qwen3-job-shape.js";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");
const REPS = quick ? 2 : 5;
const backend = (await selectBackend({ log: () => {} })).label;
const tokenizer = new Tokenizer({ chars: "abcdefghijklmnopqrstuvwxyz0123456789 .,!?:{}\"'()[]+-*/=<>\n" });
const arch = qwen3JobArch(tokenizer.vocabSize);
const model = PretrainedModel.random(arch, 1, { std: 0.05 });
const tok = tokenStream(tokenizer.vocabSize, 7);
const preamble = Array.from({ length: 150 }, tok);
const prompts = Array.from({ length: 16 }, () => [...preamble, ...Array.from({ length: 30 }, tok)]);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;

/** Time to first token of the 16 prompts sent one after another (ms per request), and 16 concurrent requests. */
async function measure(cache: boolean) {
  const gen = new Generator(model, tokenizer, { prefixCache: cache ? {} : false });
  await gen.generate({ promptIds: prompts[0] as number[], maxTokens: 1, temperature: 0 });
  let t0 = performance.now();
  for (const p of prompts) await gen.generate({ promptIds: p, maxTokens: 1, temperature: 0 });
  const ttftMs = (performance.now() - t0) / prompts.length;
  t0 = performance.now();
  const out = await Promise.all(
    prompts.map((p, i) =>
      gen.generate({ promptIds: p, maxTokens: 32, temperature: 1, seed: i, ignoreEos: true }),
    ),
  );
  const genS = (performance.now() - t0) / 1000;
  const tokens = out.reduce((n, r) => n + r.tokenIds.length, 0);
  return { ttftMs, concurrentTokensPerS: tokens / genS, stats: gen.prefixCacheStats };
}

const loadBefore = loadavg();
const runs: Record<"cached" | "plain", Array<Awaited<ReturnType<typeof measure>>>> = {
  cached: [],
  plain: [],
};
for (let r = 0; r < REPS; r++) {
  runs.cached.push(await measure(true));
  runs.plain.push(await measure(false));
}
const loadAfter = loadavg();
const summary = (xs: typeof runs.cached) => ({
  ttftMs: median(xs.map((x) => x.ttftMs)),
  concurrentTokensPerS: median(xs.map((x) => x.concurrentTokensPerS)),
});
const cached = summary(runs.cached);
const plain = summary(runs.plain);
const results = {
  date: new Date().toISOString(),
  backend,
  cpus: cpus().length,
  loadavg: { before: loadBefore, after: loadAfter },
  reps: REPS,
  prompt: { preamble: 150, own: 30 },
  cached,
  plain,
  ttftSpeedup: plain.ttftMs / cached.ttftMs,
  concurrentSpeedup: cached.concurrentTokensPerS / plain.concurrentTokensPerS,
  cacheStats: runs.cached[0]?.stats,
  raw: runs,
};
writeFileSync(join(here, "results", "prefix-cache.json"), `${JSON.stringify(results, null, 2)}\n`);
const md = [
  "# Prefix caching in generation (bench/prefix-cache.ts)",
  "",
  `${results.date}, backend ${backend}, ${results.cpus} cores, load average ${loadBefore.map((x) => x.toFixed(2)).join(" ")} before / ${loadAfter.map((x) => x.toFixed(2)).join(" ")} after; median of ${REPS} interleaved runs.`,
  "Model: calc-agent-qwen3's shape (Qwen3, d=64, 2 layers); prompts: a shared 150-token preamble + 30 own tokens.",
  "",
  "| measure | cache on | cache off | ratio |",
  "|---|---:|---:|---:|",
  `| time to first token, requests one after another (ms) | ${cached.ttftMs.toFixed(1)} | ${plain.ttftMs.toFixed(1)} | ${results.ttftSpeedup.toFixed(2)}x faster |`,
  `| 16 concurrent requests x 32 tokens (tokens/s) | ${cached.concurrentTokensPerS.toFixed(0)} | ${plain.concurrentTokensPerS.toFixed(0)} | ${results.concurrentSpeedup.toFixed(2)}x |`,
  "",
  "Requests that arrive together are prefilled together with or without the cache (their shared preamble runs once, see generate/prefill-groups.ts), so the cache pays off for requests arriving one after another: its time to first token is the prefill it saves.",
  "",
  `Cache after one run: ${JSON.stringify(results.cacheStats)}`,
  "",
];
writeFileSync(join(here, "results", "prefix-cache.md"), md.join("\n"));
console.log(md.join("\n"));
model.dispose();
