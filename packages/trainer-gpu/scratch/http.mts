import { selectBackend, PolicyModel, Tokenizer, PolicyServer } from "/work/main/packages/trainer-gpu/src/index.ts";
import OpenAI from "openai";
await selectBackend({ log: () => {} });
const tok = new Tokenizer();
const model = PolicyModel.create({ vocabSize: tok.vocabSize, dModel: 64, nLayers: 2, nHeads: 4, contextLength: 256, seed: 2 });
const server = new PolicyServer({ model, tokenizer: tok });
await server.start();
const client = new OpenAI({ baseURL: server.baseUrl, apiKey: "bench", maxRetries: 0 });
const ask = (seed: number, n: number) => client.chat.completions.create({ model: "agl-policy", messages: [{ role: "user", content: "What is 12 + 30? Use the calculator." }], max_tokens: n, seed, ignore_eos: true } as any);
await Promise.all(Array.from({ length: 4 }, (_, i) => ask(i, 8)));
for (let rep = 0; rep < 2; rep++) {
  const s0 = server.generator.steps;
  let maxActive = 0;
  const iv = setInterval(() => { maxActive = Math.max(maxActive, server.generator.activeCount); }, 1);
  const t0 = performance.now();
  await Promise.all(Array.from({ length: 32 }, (_, i) => ask(100 + i, 64)));
  clearInterval(iv);
  console.log("ms", (performance.now() - t0).toFixed(0), "steps", server.generator.steps - s0, "maxActive", maxActive);
}
await server.stop();
