import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  applyLora,
  ChatTemplate,
  externalEngine,
  loadPretrained,
  selectBackend,
  Tokenizer,
  VllmLoraSync,
  writeRandomCheckpoint,
} from "@agl/trainer-gpu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeVllm } from "../../../packages/trainer-gpu/src/engine/test-support/fake-vllm.js";
import { makeSplits } from "./dataset.js";
import { evaluatePolicy } from "./evaluate.js";

/** The evaluation outside training can generate on an external engine (here a vLLM stand-in). */

let root: string;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-calc-eval-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("evaluatePolicy on an external engine", () => {
  it("runs every problem through the engine's adapter of the policy", async () => {
    const splits = makeSplits({ train: 4, demo: 4, val: 4, test: 4 }, 1);
    const tokenizer = new Tokenizer({
      chars: '0123456789+-*=.,?:"{}[]_ abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ',
    });
    const template = new ChatTemplate(tokenizer);
    const baseDir = join(root, "base");
    await writeRandomCheckpoint(baseDir, {
      family: "llama",
      vocabSize: tokenizer.vocabSize,
      hiddenSize: 16,
      numLayers: 1,
      numHeads: 2,
      numKvHeads: 1,
      maxPositionEmbeddings: 256,
    });
    const engine = await startFakeVllm({ baseDir, tokenizer, template, servedModelName: "base" });
    try {
      const { model } = await loadPretrained(baseDir);
      applyLora(model, { rank: 2, alpha: 4, targetModules: ["q_proj", "v_proj"] });
      const serve = externalEngine({
        url: `${engine.url}/v1`,
        weightSync: new VllmLoraSync({ url: engine.url, adapterDir: join(root, "adapters") }),
      });
      const result = await evaluatePolicy({ model, tokenizer, template }, splits.val, {
        temperature: 1,
        seed: 3,
        serve,
      });
      expect(result.n).toBe(splits.val.length);
      const served = engine.events.filter((e) => e.type === "serve");
      expect(served.length).toBeGreaterThanOrEqual(splits.val.length);
      expect(served.every((e) => e.type === "serve" && e.model === "policy-v0" && e.status === 200)).toBe(
        true,
      );
      // Closing the evaluation's engine handle unloads its adapter.
      expect(engine.adapters()).toEqual([]);
      model.dispose();
    } finally {
      await engine.close();
    }
  });
});
