/**
 * Op-by-op profile of one HF decode step (issue 28 item 3): the bench/generation-batching.ts model
 * (qwen2, d=256, 4 layers, vocab 2048, LoRA r=16) at 1 and 16 rows against a 33-position cache, kernel
 * times from tf.profile grouped by kernel name, plus the step's CPU time and the sampling of its logits.
 *
 *   pnpm exec tsx bench/decode-step-profile.ts [--steps N] [--shapes]   (kernel times by name [and shape])
 *   pnpm exec tsx bench/decode-step-profile.ts --ab [--steps N]         (generation kernels on vs off)
 */

import { loadavg } from "node:os";
import { selectBackend, tf } from "@agl/trainer-gpu";
import { createRng, sampleToken } from "../packages/trainer-gpu/src/generate/sampling.js";
import { generationKernels } from "../packages/trainer-gpu/src/pretrained/decoder.js";
import { prefillRows } from "../packages/trainer-gpu/src/pretrained/incremental.js";
import { generationBenchModel } from "./support/generation-model.js";

const stepsArg = process.argv.indexOf("--steps");
const STEPS = stepsArg > 0 ? Number(process.argv[stepsArg + 1]) : 20;
await selectBackend({ log: () => {} });
const model = generationBenchModel();
const prompt = Array.from({ length: 32 }, (_, i) => 11 + ((i * 13) % 2000));

async function profile(rows: number, kernelTimes = true) {
  const { cache } = prefillRows(
    model,
    Array.from({ length: rows }, () => prompt),
    true,
  );
  const bias = tf.zeros([rows, 1, 1, 33]) as tf.Tensor4D;
  const tokens = Array.from({ length: rows }, (_, i) => 100 + i);
  const positions = new Array<number>(rows).fill(32);
  const step = () => model.decodeStep(tokens, positions, cache, bias);
  for (let i = 0; i < 30; i++) tf.dispose(step().cache.flatMap((c) => [c.k, c.v]));
  // CPU per step (no profiler), then sampling of the logits per step.
  const c0 = process.cpuUsage();
  let logits: Float32Array = new Float32Array();
  for (let i = 0; i < STEPS; i++) {
    const r = step();
    logits = r.logits;
    tf.dispose(r.cache.flatMap((c) => [c.k, c.v]));
  }
  const c1 = process.cpuUsage(c0);
  const stepMs = (c1.user + c1.system) / 1000 / STEPS;
  const rng = createRng(1);
  const V = 2048;
  const s0 = process.cpuUsage();
  for (let i = 0; i < STEPS; i++)
    for (let r = 0; r < rows; r++)
      sampleToken(logits.subarray(r * V, (r + 1) * V), { temperature: 1, topP: 1, topK: 0 }, rng);
  const s1 = process.cpuUsage(s0);
  const sampleMs = (s1.user + s1.system) / 1000 / STEPS;
  const byName = new Map<string, { ms: number; n: number }>();
  let total = 0;
  for (let i = 0; i < (kernelTimes ? STEPS : 0); i++) {
    const info = await tf.profile(() => {
      const r = step();
      tf.dispose(r.cache.flatMap((c) => [c.k, c.v]));
      return [];
    });
    for (const k of info.kernels) {
      const key = `${k.name} ${JSON.stringify(k.outputShapes)}`;
      const e = byName.get(key) ?? { ms: 0, n: 0 };
      e.ms += k.kernelTimeMs as number;
      e.n += 1;
      byName.set(key, e);
      total += k.kernelTimeMs as number;
    }
  }
  tf.dispose([bias, ...cache.flatMap((c) => [c.k, c.v])]);
  return { rows, stepMs, sampleMs, kernelMs: total / STEPS, byName };
}

const load = loadavg();
/**
 * CPU ms of the step's weight products alone (the 7 linears per layer, their LoRA pair, the head) at
 * `rows`: the floor a decode step cannot go below without fewer multiply-adds or a faster GEMM.
 */
function gemmFloor(rows: number): number {
  const d = 256;
  const shapes: Array<[number, number]> = [];
  for (let l = 0; l < 4; l++)
    for (const [k, n] of [
      [d, 256],
      [d, 128],
      [d, 128],
      [256, d],
      [d, 768],
      [d, 768],
      [768, d],
    ] as Array<[number, number]>)
      shapes.push([k, n], [k, 16], [16, n]);
  shapes.push([d, 2048]);
  const ws = shapes.map(([k, n]) => tf.variable(tf.randomNormal([k, n])));
  const xs = new Map(shapes.map(([k]) => [k, tf.randomNormal([rows, k])]));
  const run = () => {
    for (const [i, [k]] of shapes.entries())
      tf.matMul(xs.get(k) as tf.Tensor2D, ws[i] as tf.Variable<tf.Rank.R2>).dispose();
  };
  for (let i = 0; i < 20; i++) run();
  const c0 = process.cpuUsage();
  for (let i = 0; i < STEPS; i++) run();
  const c = process.cpuUsage(c0);
  tf.dispose([...ws, ...xs.values()]);
  return (c.user + c.system) / 1000 / STEPS;
}

if (process.argv.includes("--ab")) {
  // Kernels on vs off, interleaved rounds: CPU ms per decode step (median) and the 16-vs-1 step ratio.
  const ms: Record<string, number[]> = {};
  for (let round = 0; round < 5; round++)
    for (const on of [true, false])
      for (const rows of [1, 16]) {
        generationKernels.enabled = on;
        const p = await profile(rows, false);
        (ms[`${on ? "on" : "off"} ${rows}`] ??= []).push(p.stepMs + p.sampleMs);
      }
  generationKernels.enabled = true;
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  for (const arm of ["on", "off"]) {
    const [a, b] = [med(ms[`${arm} 1`] as number[]), med(ms[`${arm} 16`] as number[])];
    console.log(
      `kernels ${arm}: step+sampling CPU ms 1 row ${a.toFixed(2)}, 16 rows ${b.toFixed(2)}, 16 x t1 / t16 = ${((16 * a) / b).toFixed(2)}`,
    );
  }
  const g1 = [gemmFloor(1), gemmFloor(1), gemmFloor(1)].sort((a, b) => a - b)[1] as number;
  const g16 = [gemmFloor(16), gemmFloor(16), gemmFloor(16)].sort((a, b) => a - b)[1] as number;
  console.log(`weight products alone: 1 row ${g1.toFixed(2)} ms, 16 rows ${g16.toFixed(2)} ms`);
  console.log(
    `load average ${load.map((x) => x.toFixed(1)).join(" ")} -> ${loadavg()
      .map((x) => x.toFixed(1))
      .join(" ")}`,
  );
  model.dispose();
  process.exit(0);
}
for (const rows of [16, 1, 16, 1]) {
  const p = await profile(rows);
  console.log(
    `rows ${rows}: step CPU ${p.stepMs.toFixed(2)} ms, kernels ${p.kernelMs.toFixed(2)} ms, sampling ${p.sampleMs.toFixed(2)} ms (load ${load.map((x) => x.toFixed(1)).join(" ")})`,
  );
  const byKernel = new Map<string, { ms: number; n: number }>();
  for (const [key, e] of p.byName) {
    const name = key.split(" ")[0] as string;
    const k = byKernel.get(name) ?? { ms: 0, n: 0 };
    k.ms += e.ms;
    k.n += e.n;
    byKernel.set(name, k);
  }
  for (const [name, e] of [...byKernel].sort((a, b) => b[1].ms - a[1].ms))
    console.log(`  ${name.padEnd(22)} ${(e.ms / STEPS).toFixed(3)} ms  x${e.n / STEPS}`);
  if (process.argv.includes("--shapes"))
    for (const [key, e] of [...p.byName].sort((a, b) => b[1].ms - a[1].ms).slice(0, 40))
      console.log(`    ${key.padEnd(60)} ${(e.ms / STEPS).toFixed(3)} ms  x${e.n / STEPS}`);
}
model.dispose();
