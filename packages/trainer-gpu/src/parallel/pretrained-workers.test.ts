import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { Generator } from "../generate/generator.js";
import { type RowTensors, updateActor } from "../ppo/actor.js";
import { AdamW } from "../ppo/optim.js";
import { SeededRandom } from "../ppo/rng.js";
import { actorOptions } from "../ppo/test-support/actor-options.js";
import type { TrainRow } from "../ppo/triplet-rows.js";
import { loadPretrainedPolicy, type PretrainedPolicy } from "../pretrained/load-policy.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { updateActorOnWorkers } from "./data-parallel.js";
import { startPolicyWorkers } from "./pool.js";

/** A loaded Hugging Face checkpoint (qwen3, HF tokenizer) with LoRA adapters, replicated on workers. */

let dir: string;
let serial: PretrainedPolicy;
let parallel: PretrainedPolicy;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ seed: 4 });
  serial = await loadPretrainedPolicy(dir, { lora: { rank: 4, seed: 2 } });
  parallel = await loadPretrainedPolicy(dir, { lora: { rank: 4, seed: 2 } });
});
afterAll(async () => {
  serial?.model.dispose();
  parallel?.model.dispose();
  await rm(dirname(dir), { recursive: true, force: true });
});

function adapterDiff(a: PretrainedPolicy, b: PretrainedPolicy): number {
  let worst = 0;
  const va = a.model.trainableVariables;
  const vb = b.model.trainableVariables;
  va.forEach((v, k) => {
    const x = v.dataSync();
    const y = vb[k]!.dataSync();
    for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
  });
  return worst;
}

describe("PolicyWorkers with a PretrainedModel + LoRA", () => {
  it("samples as in process, and a data-parallel actor update moves only the adapters, as in one thread", async () => {
    const pool = await startPolicyWorkers(parallel, { workers: 2 });
    try {
      const prompt = parallel.template.encodeChat([{ role: "user", content: "hi there" }]).ids;
      const reqs = [0, 1, 2].map((i) => ({ promptIds: prompt, seed: 10 + i, maxTokens: 10, temperature: 1 }));
      const local = new Generator(parallel.model, parallel.tokenizer);
      const expected = await Promise.all(reqs.map((r) => local.generate(r)));
      expect((await pool.generate(1, reqs)).map((r) => r.tokenIds)).toEqual(expected.map((e) => e.tokenIds));

      const rng = new SeededRandom(5);
      const V = parallel.model.config.vocabSize;
      const rows: TrainRow[] = Array.from({ length: 4 }, (_, i) => {
        const responseIds = Array.from({ length: 3 + i }, () => rng.int(V));
        return {
          rolloutId: `r${i}`,
          uid: "u",
          score: i % 2,
          promptIds: Array.from({ length: 4 }, () => rng.int(V)),
          responseIds,
          responseMask: responseIds.map(() => 1),
          rolloutLogprobs: null,
          isDrop: false,
          responseTruncated: false,
        };
      });
      const inputs: RowTensors[] = rows.map((r) => ({
        advantages: r.responseIds.map(() => (r.score ? 1 : -1)),
        oldLogprobs: null,
        refLogprobs: null,
        tisWeights: null,
      }));
      const options = () => actorOptions({ microBatchRows: 2, epochs: 2 });

      const adam = (p: PretrainedPolicy) =>
        new AdamW(p.model.trainableVariables, { betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0 });
      const base = parallel.model.variable(parallel.model.weightNames[3]!).dataSync().slice();
      updateActor(serial.model, adam(serial), rows, inputs, options());
      await updateActorOnWorkers(pool, adam(parallel), rows, inputs, options());
      expect(adapterDiff(serial, parallel)).toBeLessThanOrEqual(1e-5);
      expect(Array.from(parallel.model.variable(parallel.model.weightNames[3]!).dataSync())).toEqual(
        Array.from(base),
      );
      // The broadcast adapters reached the workers: they sample what the updated main model samples.
      const after = await Promise.all(reqs.map((r) => local.generate(r)));
      expect(after.map((a) => a.tokenIds)).not.toEqual(expected.map((e) => e.tokenIds));
      for (const w of [0, 1])
        expect((await pool.generate(w, reqs)).map((r) => r.tokenIds)).toEqual(after.map((a) => a.tokenIds));
    } finally {
      await pool.close();
    }
  });
});
