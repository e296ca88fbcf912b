import { applyLora, Generator, PretrainedModel, parseHfConfig, randomCheckpointConfig, selectBackend, Tokenizer } from "@agl/trainer-gpu";
await selectBackend({ log: () => {} });
const tokenizer = new Tokenizer({ chars: Array.from({ length: 2048 - 11 }, (_, i) => String.fromCodePoint(0x4e00 + i)).join("") });
const { arch } = parseHfConfig(randomCheckpointConfig({ family: "qwen2", seed: 1, vocabSize: 2048, hiddenSize: 256, intermediateSize: 768, numLayers: 4, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 1024 }));
const model = applyLora(PretrainedModel.random(arch, 1), { rank: 16 });
const promptOf = (k: number) => Array.from({ length: 32 }, (_, i) => 11 + ((i * 13 + k * 101) % 2000));
const N = Number(process.argv[2] ?? 16);
const distinct = process.argv.includes("--distinct");
const gen = new Generator(model, tokenizer, { maxBatchSize: 64, prefixCache: false });
await gen.generate({ promptIds: promptOf(999), maxTokens: 4, ignoreEos: true, seed: 0 });
for (let round = 0; round < 20; round++) {
  const c0 = process.cpuUsage();
  const out = await Promise.all(Array.from({ length: N }, (_, i) => gen.generate({ promptIds: promptOf(distinct ? i : 0), maxTokens: 32, ignoreEos: true, seed: 10 + i })));
  const c = process.cpuUsage(c0);
  const tokens = out.reduce((n, r) => n + r.tokenIds.length, 0);
  console.log(`N=${N} round ${round}: ${(tokens / ((c.user + c.system) / 1e6)).toFixed(0)} tok/CPU s, ${((c.user + c.system) / 1000 / 32).toFixed(2)} CPU ms per step`);
}
