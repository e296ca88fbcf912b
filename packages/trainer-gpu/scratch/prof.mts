import * as tf from "@tensorflow/tfjs";
import { selectBackend, PolicyModel } from "/work/main/packages/trainer-gpu/src/index.ts";
import { maskedNll } from "/work/main/packages/trainer-gpu/src/sft/sft.ts";
await selectBackend();
const B = Number(process.argv[2] ?? 6), T = Number(process.argv[3] ?? 60), d = Number(process.argv[4] ?? 32);
const m = PolicyModel.create({ vocabSize: 108, dModel: d, nLayers: 2, nHeads: 4, contextLength: 128, seed: 1 });
const ids = Array.from({ length: B }, (_, b) => Array.from({ length: T }, (_, t) => (b * 7 + t * 3) % 108));
const mask = ids.map((r) => r.map(() => 1));
const opt = tf.train.adam(1e-3);
for (let i = 0; i < 3; i++) tf.dispose(opt.minimize(() => maskedNll(m, ids, mask), true, m.trainableVariables));
const t0 = performance.now();
const N = 10;
for (let i = 0; i < N; i++) { const l = opt.minimize(() => maskedNll(m, ids, mask), true, m.trainableVariables); l!.dataSync(); l!.dispose(); }
const ms = (performance.now() - t0) / N;
console.log(`B${B} T${T} d${d}: ${ms.toFixed(1)} ms/step, ${(B * T / ms * 1000).toFixed(0)} tok/s`);
const prof = await tf.profile(() => { const l = opt.minimize(() => maskedNll(m, ids, mask), true, m.trainableVariables); return l!; });
const agg = new Map<string, number>();
for (const k of prof.kernels) agg.set(k.name, (agg.get(k.name) ?? 0) + (k.kernelTimeMs as number));
console.log([...agg.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15).map(([k, v]) => `${k}:${v.toFixed(1)}`).join(" "));

const mmAgg = new Map<string, number>();
for (const k of prof.kernels) if (k.name === "BatchMatMul") { const key = JSON.stringify(k.inputShapes); mmAgg.set(key, (mmAgg.get(key) ?? 0) + (k.kernelTimeMs as number)); }
console.log([...mmAgg.entries()].sort((a, b) => b[1] - a[1]).slice(0, 14).map(([k, v]) => `${k}:${v.toFixed(1)}`).join("\n"));
