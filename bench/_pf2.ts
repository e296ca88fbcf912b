import { applyLora, PretrainedModel, parseHfConfig, randomCheckpointConfig, selectBackend, tf } from "@agl/trainer-gpu";
import { generationKernels } from "../packages/trainer-gpu/src/pretrained/decoder.js";
import { prefillRows } from "../packages/trainer-gpu/src/pretrained/incremental.js";
await selectBackend({ log: () => {} });
const { arch } = parseHfConfig(randomCheckpointConfig({ family: "qwen2", seed: 1, vocabSize: 2048, hiddenSize: 256, intermediateSize: 768, numLayers: 4, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 1024 }));
const model = applyLora(PretrainedModel.random(arch, 1), { rank: 16 });
const promptOf = (k: number) => Array.from({ length: 32 }, (_, i) => 11 + ((i * 13 + k * 101) % 2000));
const res: Record<string, number[]> = {};
for (let round = 0; round < 4; round++)
  for (const on of [true, false])
    for (const n of [16, 1]) {
      generationKernels.enabled = on;
      const prompts = Array.from({ length: n }, (_, i) => promptOf(i));
      for (let i = 0; i < 2; i++) tf.dispose(prefillRows(model, prompts, true).cache.flatMap((c) => [c.k, c.v]));
      const c0 = process.cpuUsage();
      for (let i = 0; i < 4; i++) tf.dispose(prefillRows(model, prompts, true).cache.flatMap((c) => [c.k, c.v]));
      const c = process.cpuUsage(c0);
      (res[`${on ? "on" : "off"} n=${n}`] ??= []).push((c.user + c.system) / 4000);
    }
for (const [k, v] of Object.entries(res)) console.log(k, v.map((x) => x.toFixed(1)).join(" "));
for (const on of [true, false, true, false]) {
  generationKernels.enabled = on;
  const prompts = Array.from({ length: 16 }, (_, i) => promptOf(i));
  const info = await tf.profile(() => { tf.dispose(prefillRows(model, prompts, true).cache.flatMap((c) => [c.k, c.v])); return []; });
  const by = new Map<string, number>();
  for (const k of info.kernels) by.set(k.name, (by.get(k.name) ?? 0) + (k.kernelTimeMs as number));
  console.log(on, [...by].sort((a, b) => b[1] - a[1]).slice(0, 12).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", "));
}
