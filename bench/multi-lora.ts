/**
 * Multi-LoRA serving benchmark (issue 25): one qwen3-architecture checkpoint (written in the HF layout,
 * loaded with `loadPretrained`) with four LoRA adapters (rank 8 on every linear layer) over one base. The
 * same work — `BATCH` sequences, a `PROMPT`-token prompt, `NEW` generated tokens each (eos ignored) —
 * runs through the dynamic-batching Generator with every row on one adapter, and with the rows spread over
 * the four adapters and the base (per-row adapter selection in one batch, as vLLM's multi-LoRA); also the
 * training-style forward (log-probs of `BATCH` x `SEQ` tokens). Runs alternate (single, mixed, single, ...);
 * throughput is per CPU second of this process (WASM runs on one thread, so CPU time is the work done and
 * does not count the time other processes on a shared machine hold the core), and the ratio is the median
 * of the per-repetition ratios. Wall-clock numbers are kept in the raw output. Also: the bytes each
 * adapter adds (one copy of the base). Writes bench/results/multi-lora.{json,md}.
 *
 *   pnpm exec tsx bench/multi-lora.ts [--quick]
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  adapterView,
  addLoraAdapter,
  Generator,
  loadPretrained,
  selectBackend,
  Tokenizer,
  tf,
  writeRandomCheckpoint,
} from "@agl/trainer-gpu";
import { median } from "./support/median.js";

const here = dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes("--quick");
const ARCH = {
  vocabSize: 2048,
  hiddenSize: 256,
  intermediateSize: 768,
  numLayers: 4,
  numHeads: 4,
  numKvHeads: 2,
  maxPositionEmbeddings: 512,
};
const ADAPTERS = ["a", "b", "c", "d"];
const BATCH = 16;
const PROMPT = 32;
const NEW = 16;
const SEQ = 128;

async function main() {
  const selection = await selectBackend();
  const loadBefore = loadavg();
  const cpu0 = process.cpuUsage();
  console.log(
    `backend ${selection.label}; ${cpus().length} cores; load average ${loadBefore[0]?.toFixed(2)}`,
  );
  const dir = mkdtempSync(join(tmpdir(), "agl-bench-mlora-"));
  const reps = quick ? 3 : 5;
  try {
    await writeRandomCheckpoint(dir, { family: "qwen3", seed: 1, ...ARCH });
    const { model } = await loadPretrained(dir);
    const baseBytes = tf.memory().numBytes;
    const bytesPerAdapter: number[] = [];
    for (const [i, name] of ADAPTERS.entries()) {
      const before = tf.memory().numBytes;
      addLoraAdapter(model, name, { rank: 8, alpha: 16, seed: i + 1 });
      bytesPerAdapter.push(tf.memory().numBytes - before);
      let k = 0;
      for (const w of model.adapters.get(name)!.weights.values())
        w.b.assign(tf.randomNormal(w.b.shape, 0, 0.02, "float32", 100 * i + k++));
    }
    const tokenizer = new Tokenizer();
    const generator = new Generator(model, tokenizer, { maxBatchSize: BATCH, samplingDefaults: {} });
    const prompts = Array.from({ length: BATCH }, (_, r) =>
      Array.from({ length: PROMPT }, (_, t) => (r * 131 + t * 17 + 5) % ARCH.vocabSize),
    );
    const single = prompts.map(() => "a" as string | null);
    const mixed = prompts.map((_, r) => (r % 5 === 4 ? null : (ADAPTERS[r % 4] as string)));
    const cpuNow = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    };
    const wall: Array<Record<string, number>> = [];
    let lastWall = 0;
    const generate = async (selection: Array<string | null>) => {
      const t0 = performance.now();
      const c0 = cpuNow();
      const results = await generator.generateMany(
        prompts.map((promptIds, r) => ({
          promptIds,
          adapter: selection[r],
          maxTokens: NEW,
          ignoreEos: true,
          temperature: 0,
        })),
      );
      const tokens = results.reduce((n, x) => n + x.tokenIds.length, 0);
      lastWall = tokens / ((performance.now() - t0) / 1000);
      return tokens / (cpuNow() - c0);
    };
    const ids = Array.from({ length: BATCH }, (_, r) =>
      Array.from({ length: SEQ }, (_, t) => (r * 7 + t * 13 + 1) % ARCH.vocabSize),
    );
    const forward = (selection: Array<string | null>) => {
      const t0 = performance.now();
      const c0 = cpuNow();
      tf.tidy(() => {
        model
          .scores(ids, undefined, { temperature: 1, entropy: true, adapters: selection })
          .logProbs.dataSync();
      });
      lastWall = (BATCH * SEQ) / ((performance.now() - t0) / 1000);
      return (BATCH * SEQ) / (cpuNow() - c0);
    };
    // Warm-up of both paths, then alternate.
    await generate(single);
    await generate(mixed);
    forward(single);
    forward(mixed);
    const raw: Array<Record<string, number>> = [];
    for (let i = 0; i < reps; i++) {
      const row = { genSingle: 0, genMixed: 0, fwdSingle: 0, fwdMixed: 0 };
      const w = { ...row };
      row.genSingle = await generate(single);
      w.genSingle = lastWall;
      row.genMixed = await generate(mixed);
      w.genMixed = lastWall;
      row.fwdSingle = forward(single);
      w.fwdSingle = lastWall;
      row.fwdMixed = forward(mixed);
      w.fwdMixed = lastWall;
      raw.push(row);
      wall.push(w);
      console.log(
        `rep ${i} (tokens per CPU second): generate single ${row.genSingle.toFixed(0)}, mixed ${row.genMixed.toFixed(0)}; forward single ${row.fwdSingle.toFixed(0)}, mixed ${row.fwdMixed.toFixed(0)} (wall: ${w.genSingle.toFixed(0)}/${w.genMixed.toFixed(0)}, ${w.fwdSingle.toFixed(0)}/${w.fwdMixed.toFixed(0)} tok/s)`,
      );
    }
    const best = {
      genSingle: median(raw.map((r) => r.genSingle!)),
      genMixed: median(raw.map((r) => r.genMixed!)),
      fwdSingle: median(raw.map((r) => r.fwdSingle!)),
      fwdMixed: median(raw.map((r) => r.fwdMixed!)),
    };
    // Mixed rows compute what each adapter alone computes (checked on one row).
    const one = tf.tidy(() => adapterView(model, "b").tokenLogProbs([ids[1]!]).dataSync());
    const inMixed = tf.tidy(() =>
      model
        .scores(ids.slice(0, 5), undefined, { temperature: 1, entropy: false, adapters: mixed.slice(0, 5) })
        .logProbs.dataSync(),
    );
    let maxDiff = 0;
    for (let t = 0; t < one.length; t++)
      maxDiff = Math.max(maxDiff, Math.abs(one[t]! - inMixed[SEQ - 1 + t]!));
    const cpu = process.cpuUsage(cpu0);
    const result = {
      backend: selection.label,
      cores: cpus().length,
      loadAverage: { before: loadBefore, after: loadavg() },
      cpuSeconds: (cpu.user + cpu.system) / 1e6,
      arch: ARCH,
      adapters: ADAPTERS.length,
      rank: 8,
      batch: BATCH,
      promptTokens: PROMPT,
      newTokens: NEW,
      forwardSeq: SEQ,
      mixedSelection: mixed,
      reps,
      best,
      ratios: {
        generate: median(raw.map((r) => r.genMixed! / r.genSingle!)),
        forward: median(raw.map((r) => r.fwdMixed! / r.fwdSingle!)),
      },
      perRepRatios: raw.map((r) => ({
        generate: r.genMixed! / r.genSingle!,
        forward: r.fwdMixed! / r.fwdSingle!,
      })),
      wallClock: wall,
      memory: {
        baseAndCachesBytes: baseBytes,
        bytesPerAdapter,
        adapterShareOfBase: bytesPerAdapter[0]! / baseBytes,
      },
      mixedRowMaxAbsDiffVsAlone: maxDiff,
      raw,
    };
    console.log(
      `ratio mixed/single: generate ${result.ratios.generate.toFixed(3)}, forward ${result.ratios.forward.toFixed(3)}; adapter ${(bytesPerAdapter[0]! / 1024).toFixed(0)} KiB vs ${(baseBytes / 1024 / 1024).toFixed(1)} MiB base`,
    );
    mkdirSync(join(here, "results"), { recursive: true });
    writeFileSync(join(here, "results", "multi-lora.json"), `${JSON.stringify(result, null, 2)}\n`);
    const md = [
      "# Multi-LoRA batching (bench/multi-lora.ts)",
      "",
      `Backend ${result.backend}, ${result.cores} cores, load average ${loadBefore[0]?.toFixed(2)} → ${result.loadAverage.after[0]?.toFixed(2)} (shared machine), ${result.cpuSeconds.toFixed(1)} s CPU.`,
      `qwen3 architecture, hidden ${ARCH.hiddenSize}, ${ARCH.numLayers} layers, vocab ${ARCH.vocabSize}; ${ADAPTERS.length} adapters, rank 8 on all 7 linear layers.`,
      `Single: ${BATCH} rows on adapter "a". Mixed: the same ${BATCH} rows spread over the 4 adapters and the base (${mixed.map((m) => m ?? "base").join(", ")}).`,
      "",
      "| work | single adapter (tokens per CPU s, median) | mixed adapters (tokens per CPU s, median) | mixed / single (median of per-rep ratios) |",
      "|---|---:|---:|---:|",
      `| generate (${BATCH} x ${NEW} new tokens after a ${PROMPT}-token prompt) | ${best.genSingle.toFixed(0)} | ${best.genMixed.toFixed(0)} | ${result.ratios.generate.toFixed(3)} |`,
      `| forward log-probs (${BATCH} x ${SEQ} tokens) | ${best.fwdSingle.toFixed(0)} | ${best.fwdMixed.toFixed(0)} | ${result.ratios.forward.toFixed(3)} |`,
      "",
      `${reps} alternating repetitions; per-rep ratios (generate/forward): ${result.perRepRatios.map((r) => `${r.generate.toFixed(2)}/${r.forward.toFixed(2)}`).join(", ")}. Raw output: multi-lora-run.log. Memory: each adapter adds ${(bytesPerAdapter[0]! / 1024).toFixed(0)} KiB (${(100 * result.memory.adapterShareOfBase).toFixed(1)}% of the ${(baseBytes / 1024 / 1024).toFixed(1)} MiB base); the base is held once.`,
      `A mixed-batch row's log-probs vs the same row on its adapter alone: max |diff| ${maxDiff.toExponential(2)}.`,
      "",
    ].join("\n");
    writeFileSync(join(here, "results", "multi-lora.md"), md);
    model.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
