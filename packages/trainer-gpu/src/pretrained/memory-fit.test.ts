import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { sft } from "../sft/sft.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { loadPretrained } from "./load.js";
import { fitMicroBatch, TrainingMemoryError, trainingStepBytes, WASM_HEAP_BYTES } from "./memory-fit.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

/**
 * Issue: a 4.9M-parameter Qwen3 checkpoint with the real 151,936-token vocabulary crashed the WASM backend
 * ("memory access out of bounds") at SFT's default batch. Training now keeps the head's logits chunked,
 * checks each micro-batch against the heap before the first step, and fails early naming the option.
 */

let root: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-memfit-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function model(name: string, vocabSize: number): Promise<PretrainedModel> {
  const dir = join(root, name);
  await writeRandomCheckpoint(dir, { family: "qwen3", seed: 2, vocabSize, maxPositionEmbeddings: 512 });
  return (await loadPretrained(dir)).model;
}

/** Measured peak bytes of one full fine-tuning step above what was allocated before it. */
async function measuredStep(m: PretrainedModel, rows: number, T: number, V: number): Promise<number> {
  const ids = Array.from({ length: rows }, (_, b) =>
    Array.from({ length: T }, (_, t) => (b * 131 + t * 17) % V),
  );
  const optimizer = tf.train.adam(1e-3);
  const base = tf.memory().numBytes;
  const info = await tf.profile(() => {
    const { value, grads } = tf.variableGrads(
      () => tf.neg(tf.mean(m.tokenLogProbs(ids))) as tf.Scalar,
      m.trainableVariables,
    );
    optimizer.applyGradients(grads as tf.NamedTensorMap as never);
    tf.dispose([value, ...Object.values(grads)]);
  });
  optimizer.dispose();
  return info.peakBytes - base;
}

describe("training memory on the WASM heap", () => {
  it("the step estimate bounds the measured peak without being absurdly loose", async () => {
    const V = 30_000;
    const m = await model("est", V);
    try {
      for (const [rows, T] of [
        [2, 64],
        [8, 96],
      ] as const) {
        const measured = await measuredStep(m, rows, T, V);
        const estimate = trainingStepBytes(m, rows, T);
        expect(estimate).toBeGreaterThan(measured);
        expect(estimate).toBeLessThan(3 * measured);
      }
    } finally {
      m.dispose();
    }
  });

  it("a micro-batch the caller did not fix shrinks to fit; a fixed one fails naming the option; one row too long names the length", async () => {
    const m = await model("fit", 30_000);
    try {
      const base = { seqLength: 128, option: "microBatchSize", force: true };
      // A heap with room for a few rows only.
      const heapBytes = (tf.memory().numBytes + trainingStepBytes(m, 5, 128) + 1024) / 0.75;
      expect(fitMicroBatch(m, { ...base, rows: 4, fixed: true, heapBytes }).rows).toBe(4);
      const shrunk = fitMicroBatch(m, { ...base, rows: 64, fixed: false, heapBytes });
      expect(shrunk.rows).toBe(5);
      expect(shrunk.neededBytes).toBeLessThanOrEqual(shrunk.availableBytes);
      let error: unknown;
      try {
        fitMicroBatch(m, { ...base, rows: 64, fixed: true, heapBytes });
      } catch (e) {
        error = e;
      }
      expect(TrainingMemoryError.isInstance(error)).toBe(true);
      expect((error as TrainingMemoryError).option).toBe("microBatchSize");
      expect((error as Error).message).toMatch(/set microBatchSize to 5 or less/);
      expect(() =>
        fitMicroBatch(m, {
          ...base,
          rows: 1,
          seqLength: 4096,
          fixed: false,
          heapBytes,
          lengthOption: "max_length",
        }),
      ).toThrow(/Even one sequence of 4096 tokens .* lower max_length/);
      // Off the WASM backend (or for another model type) nothing is checked unless forced.
      if (tf.getBackend() !== "wasm")
        expect(fitMicroBatch(m, { ...base, force: false, rows: 64, fixed: true, heapBytes }).rows).toBe(64);
      // The real ceiling: 4 GiB.
      expect(WASM_HEAP_BYTES).toBe(4 * 2 ** 30);
    } finally {
      m.dispose();
    }
  });

  it("SFT at its default batch on a 151,936-token vocabulary runs (the full-logits path needed > 4 GiB)", async () => {
    const V = 151_936;
    const m = await model("qwen-vocab", V);
    const tokenizer = new Tokenizer();
    const template = new ChatTemplate(tokenizer);
    // 16 transcripts (SFT's default batch) of ~80 tokens: 16 x 80 x 151,936 logits would be 778 MB per
    // temporary on the old path (logits, their slice, log-softmax's intermediates, the pick's one-hot).
    const text = "the quick brown fox jumps over the lazy dog ";
    const examples = Array.from({ length: 16 }, (_, i) => ({
      messages: [
        { role: "user" as const, content: `${i}: ${text}` },
        { role: "assistant" as const, content: text.slice(i % 7) },
      ],
    }));
    try {
      expect(m.parameterCount).toBeGreaterThan(4_800_000);
      const result = await sft(m, examples, { template, steps: 1, progress: false, log: () => {} });
      expect(result.losses).toHaveLength(1);
      expect(Number.isFinite(result.losses[0])).toBe(true);
      // Log-uniform over the vocabulary at initialisation.
      expect(result.losses[0]).toBeGreaterThan(Math.log(V) * 0.9);
    } finally {
      m.dispose();
    }
  }, 900_000);
});
