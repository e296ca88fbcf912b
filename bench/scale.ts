/**
 * Scale on paper (issue 24): what fits where, from `estimateMemory` and training throughput measured on
 * the active backend for the sizes that train in minutes here (process CPU time: WASM is single-threaded),
 * extrapolated beyond by LoRA training FLOPs at the 3.7M model's measured effective rate. The Qwen2.5
 * sizes use their published config.json shapes. GPU rows are an assumption stated in the report, not a
 * measurement.
 * Writes bench/results/scale.{json,md}.
 *
 *   pnpm exec tsx bench/scale.ts
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  estimateMemory,
  loadPretrained,
  type PretrainedModel,
  parseHfConfig,
  randomCheckpointConfig,
  selectBackend,
  tf,
  WASM_HEAP_BYTES,
  writeRandomCheckpoint,
} from "@agl/trainer-gpu";

const here = dirname(fileURLToPath(import.meta.url));
const BATCH = 2;
const SEQ = 64;
/** Sequences x tokens the memory column assumes (a PPO micro-batch of long rows). */
const MEM_BATCH = 8;
const MEM_SEQ = 512;
/** Assumed GPU rate: 30% of an A100's float32 peak (19.5 TFLOP/s); tfjs-node-gpu trains in float32. */
const GPU_FLOPS = 0.3 * 19.5e12;

const qwen25 = (o: Record<string, unknown>) => ({
  model_type: "qwen2",
  rms_norm_eps: 1e-6,
  rope_theta: 1000000,
  max_position_embeddings: 32768,
  hidden_act: "silu",
  ...o,
});
const SIZES: Array<{
  name: string;
  config: Record<string, unknown>;
  measure: "full" | "none";
}> = [
  {
    name: "calc-agent's Qwen3 (d64, 2 layers, trimmed vocab 1,024)",
    config: randomCheckpointConfig({
      family: "qwen3",
      vocabSize: 1024,
      hiddenSize: 64,
      intermediateSize: 192,
      numLayers: 2,
      numHeads: 4,
      numKvHeads: 2,
      headDim: 16,
      tieWordEmbeddings: true,
    }),
    measure: "full",
  },
  {
    name: "bench qwen2 (d256, 4 layers, vocab 2,048)",
    config: randomCheckpointConfig({
      family: "qwen2",
      vocabSize: 2048,
      hiddenSize: 256,
      intermediateSize: 768,
      numLayers: 4,
      numHeads: 4,
      numKvHeads: 2,
    }),
    measure: "full",
  },
  {
    name: "Qwen3 4.9M with the real 151,936-token vocabulary (d32)",
    config: randomCheckpointConfig({ family: "qwen3", vocabSize: 151936 }),
    measure: "full",
  },
  {
    name: "Qwen2.5-0.5B",
    config: qwen25({
      hidden_size: 896,
      intermediate_size: 4864,
      num_hidden_layers: 24,
      num_attention_heads: 14,
      num_key_value_heads: 2,
      vocab_size: 151936,
      tie_word_embeddings: true,
    }),
    measure: "none",
  },
  {
    name: "Qwen2.5-1.5B",
    config: qwen25({
      hidden_size: 1536,
      intermediate_size: 8960,
      num_hidden_layers: 28,
      num_attention_heads: 12,
      num_key_value_heads: 2,
      vocab_size: 151936,
      tie_word_embeddings: true,
    }),
    measure: "none",
  },
  {
    name: "Qwen2.5-7B",
    config: qwen25({
      hidden_size: 3584,
      intermediate_size: 18944,
      num_hidden_layers: 28,
      num_attention_heads: 28,
      num_key_value_heads: 4,
      vocab_size: 152064,
      tie_word_embeddings: false,
    }),
    measure: "none",
  },
];

type Arch = ReturnType<typeof parseHfConfig>["arch"];

/** Parameters in dense matmuls (the tied head counts once; an untied embedding lookup is not a matmul). */
function matmulParams(arch: Arch, parameters: number): number {
  return arch.tieWordEmbeddings ? parameters : parameters - arch.vocabSize * arch.hiddenSize;
}

/** Training FLOPs per token: full 6N, LoRA 4N (frozen base) + 6 x adapters; attention 12 x L x d x T. */
function trainFlopsPerToken(arch: Arch, matmul: number, adapters: number | null): number {
  const attention = 12 * arch.numLayers * arch.hiddenSize * SEQ;
  return adapters === null ? 6 * matmul + attention : 4 * matmul + 6 * adapters + attention;
}

async function stepMs(model: PretrainedModel, ids: number[][], reps: number): Promise<number> {
  const opt = tf.train.adam(1e-4);
  const step = () => {
    const loss = opt.minimize(
      () => tf.neg(tf.mean(model.tokenLogProbs(ids))) as tf.Scalar,
      true,
      model.trainableVariables,
    );
    loss?.dataSync();
    loss?.dispose();
  };
  step();
  // Process CPU time (user + system), not wall time: on a shared, loaded machine it is what one core gives.
  let best = Number.POSITIVE_INFINITY;
  for (let r = 0; r < reps; r++) {
    const c0 = process.cpuUsage();
    step();
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / 1000);
  }
  opt.dispose();
  return best;
}

const gib = (b: number) =>
  b >= 2 ** 30 ? `${(b / 2 ** 30).toFixed(1)} GiB` : `${(b / 2 ** 20).toFixed(0)} MiB`;

async function main() {
  const selection = await selectBackend();
  const load = loadavg()[0];
  const root = mkdtempSync(join(tmpdir(), "agl-bench-scale-"));
  const rows: Array<Record<string, unknown>> = [];
  try {
    for (const size of SIZES) {
      const { arch } = parseHfConfig(size.config);
      const full = estimateMemory(arch, { mode: "full", batchSize: MEM_BATCH, seqLength: MEM_SEQ });
      const lora = estimateMemory(arch, {
        mode: "lora",
        loraRank: 16,
        batchSize: MEM_BATCH,
        seqLength: MEM_SEQ,
      });
      const matmul = matmulParams(arch, full.parameters);
      const adapters = lora.trainableParameters;
      const fullFlops = trainFlopsPerToken(arch, matmul, null);
      const loraFlops = trainFlopsPerToken(arch, matmul, adapters);
      let measured: { mode: string; tokensPerSecond: number; how: string } | undefined;
      const ids = Array.from({ length: BATCH }, (_, b) =>
        Array.from({ length: SEQ }, (_, t) => (b * 131 + t * 17 + 3) % arch.vocabSize),
      );
      if (size.measure === "full") {
        const dir = join(root, String(rows.length));
        await writeRandomCheckpoint(dir, {
          family: size.config.model_type as "qwen2" | "qwen3",
          seed: 1,
          vocabSize: arch.vocabSize,
          hiddenSize: arch.hiddenSize,
          intermediateSize: arch.intermediateSize,
          numLayers: arch.numLayers,
          numHeads: arch.numHeads,
          numKvHeads: arch.numKvHeads,
          headDim: arch.headDim,
          tieWordEmbeddings: arch.tieWordEmbeddings,
          maxPositionEmbeddings: 1024,
        });
        const { model } = await loadPretrained(dir);
        const ms = await stepMs(model, ids, 2);
        measured = { mode: "full", tokensPerSecond: (BATCH * SEQ) / (ms / 1000), how: "measured" };
        model.dispose();
      }
      rows.push({
        name: size.name,
        parameters: full.parameters,
        loraAdapters: adapters,
        memoryFull: full.bytes.total,
        memoryLora: lora.bytes.total,
        fullFlopsPerToken: fullFlops,
        loraFlopsPerToken: loraFlops,
        measured,
      });
      console.log(
        `${size.name}: ${full.parameters.toLocaleString("en")} params, full ${gib(full.bytes.total)}, LoRA ${gib(lora.bytes.total)}${measured ? `, ${measured.mode} ${measured.tokensPerSecond.toFixed(1)} tok/s (${measured.how})` : ""}`,
      );
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
  // The effective rate (model FLOP/s) of the measured row with the most dense parameters per token
  // extrapolates the rows too large to train here.
  const ref = rows.find((r) => r.name === SIZES[1]?.name);
  const refRate = ref
    ? (ref.fullFlopsPerToken as number) * (ref.measured as { tokensPerSecond: number }).tokensPerSecond
    : Number.NaN;
  const budget = WASM_HEAP_BYTES * 0.75;
  const table = rows.map((r) => {
    const m = r.measured as { mode: string; tokensPerSecond: number; how: string } | undefined;
    const wasm = m
      ? `${m.tokensPerSecond.toFixed(m.tokensPerSecond < 10 ? 2 : 0)} (${m.mode}, ${m.how})`
      : `~${((refRate / (r.loraFlopsPerToken as number)) as number).toFixed(3)} (LoRA, extrapolated by FLOPs)`;
    const fits = (bytes: number) => (bytes <= budget ? "fits" : "no");
    const gpu = GPU_FLOPS / (r.loraFlopsPerToken as number);
    return `| ${r.name} | ${((r.parameters as number) / 1e6).toFixed(1)}M | ${gib(r.memoryFull as number)} (${fits(r.memoryFull as number)}) | ${gib(r.memoryLora as number)} (${fits(r.memoryLora as number)}) | ${wasm} | ~${gpu >= 1000 ? `${(gpu / 1000).toFixed(1)}k` : gpu.toFixed(0)} |`;
  });
  const result = {
    date: new Date().toISOString(),
    backend: selection.label,
    cores: cpus().length,
    loadAverage1m: load,
    trainBatch: [BATCH, SEQ],
    memoryBatch: [MEM_BATCH, MEM_SEQ],
    gpuFlopsAssumed: GPU_FLOPS,
    rows,
  };
  mkdirSync(join(here, "results"), { recursive: true });
  writeFileSync(join(here, "results", "scale.json"), `${JSON.stringify(result, null, 2)}\n`);
  const md = [
    "# Scale: what fits where",
    "",
    `Backend **${selection.label}**, ${cpus().length} cores, 1-min load average ${load?.toFixed(2)} at start (shared machine).`,
    "",
    `Memory: \`estimateMemory\` for a micro-batch of ${MEM_BATCH} x ${MEM_SEQ} tokens (float32 weights, gradients, Adam, activations; LoRA r16 on all projections). "fits" = within 75% of the WASM heap's 4 GiB ceiling (the share \`fitMicroBatch\` plans with). Training tokens/s on WASM: one step of ${BATCH} x ${SEQ} tokens per process CPU second (one core; WASM is single-threaded), best of 2, measured where marked, otherwise the 3.7M model's effective FLOP rate applied to the model's LoRA training FLOPs (4 x frozen + 6 x adapter parameters + attention per token). GPU: an assumption, not a measurement — model FLOPs at 30% of an A100's float32 peak (${(GPU_FLOPS / 1e12).toFixed(1)} TFLOP/s effective; tfjs-node-gpu trains in float32), LoRA.`,
    "",
    "| model | params | full fine-tuning memory (WASM?) | LoRA memory (WASM?) | training tokens/s on WASM | training tokens/s, GPU (assumed) |",
    "|---|---:|---:|---:|---|---:|",
    ...table,
    "",
  ].join("\n");
  writeFileSync(join(here, "results", "scale.md"), md);
  console.log(md);
}

await main();
