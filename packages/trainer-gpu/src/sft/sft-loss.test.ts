import * as tf from "@tensorflow/tfjs";
import { describe, expect, it } from "vitest";
import { tinySetup, toolTranscript } from "../test-support/tiny.js";
import { sft } from "./sft.js";
import { sftLoss } from "./sft-loss.js";

const words = ["hi", "hello", "hey", "yo", "sup"].map((w) => ({
  messages: [
    { role: "user" as const, content: w },
    { role: "assistant" as const, content: [...w].reverse().join("") },
  ],
}));

describe("sft learning-rate schedule", () => {
  it("linear: warm-up, then a straight fall towards 0, also on an optimizer passed in", async () => {
    const { model, template } = await tinySetup(7, 96);
    const optimizer = tf.train.adam(1);
    const seen: number[] = [];
    await sft(model, words, {
      template,
      steps: 6,
      batchSize: 2,
      learningRate: 0.01,
      warmupSteps: 2,
      schedule: "linear",
      optimizer,
      progress: false,
      onStep: () => seen.push((optimizer as unknown as { learningRate: number }).learningRate),
    });
    const expected = [0.005, 0.01, 0.01, 0.0075, 0.005, 0.0025];
    for (const [i, lr] of seen.entries()) expect(lr).toBeCloseTo(expected[i]!, 9);
    optimizer.dispose();
  });
});

describe("sftLoss", () => {
  it("is the token-weighted mean NLL of the assistant tokens, whatever the batch split", async () => {
    const { model, template } = await tinySetup(5, 96);
    const data = [...words, toolTranscript(1, 2)];
    // Independent reference: per-example log-probs from the model, summed in float64 over assistant tokens.
    let sum = 0;
    let n = 0;
    for (const ex of data) {
      const enc = template.encodeChat(ex.messages, "tools" in ex ? (ex.tools as never) : null, {
        addGenerationPrompt: false,
      });
      const lp = model.tokenLogProbs([enc.ids]).arraySync()[0]!;
      enc.assistantMask.slice(1).forEach((m, t) => {
        if (m) {
          sum -= lp[t]!;
          n += 1;
        }
      });
    }
    for (const batchSize of [1, 4, 64]) {
      const r = sftLoss(model, data, { template, batchSize });
      expect(r.tokens).toBe(n);
      expect(r.loss).toBeCloseTo(sum / n, 4);
    }
  });

  it("falls on the training examples after SFT, and reports unusable examples", async () => {
    const { model, template } = await tinySetup(6, 96);
    const before = sftLoss(model, words, { template }).loss;
    await sft(model, words, { template, steps: 60, batchSize: 5, learningRate: 1e-2, progress: false });
    expect(sftLoss(model, words, { template }).loss).toBeLessThan(before * 0.5);
    const bad = sftLoss(model, [...words, { messages: [{ role: "wizard", content: "?" }] } as never], {
      template,
    });
    expect(bad.skipped).toBe(1);
    expect(() => sftLoss(model, [{ messages: [] } as never], { template })).toThrow(/no usable example/);
  });
});
