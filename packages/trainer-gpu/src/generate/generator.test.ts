import * as tf from "@tensorflow/tfjs";
import { describe, expect, it } from "vitest";
import { tinySetup } from "../test-support/tiny.js";
import { Generator } from "./generator.js";
import type { GenerateResult } from "./request.js";
import { createRng, sampleToken } from "./sampling.js";

const prompts = ["hi", "a much longer prompt than the first one", "mid", "x", "another prompt"];

describe("Generator (dynamic batching)", () => {
  it("requests joining and leaving mid-flight produce the same tokens and logprobs as alone", async () => {
    const { model, tokenizer, template } = await tinySetup(21);
    const gen = new Generator(model, tokenizer);
    const ids = prompts.map((p) => template.encodeChat([{ role: "user", content: p }]).ids);
    const params = (i: number) => ({
      promptIds: ids[i]!,
      seed: 100 + i,
      maxTokens: 8 + 5 * i,
      ignoreEos: true,
      temperature: 0.9,
    });
    const alone: GenerateResult[] = [];
    for (let i = 0; i < ids.length; i++) alone.push(await gen.generate(params(i)));
    const stepsAlone = gen.steps;

    // Staggered arrivals: each request joins after the previous one has produced a few tokens.
    const pending = [];
    for (let i = 0; i < ids.length; i++) {
      let started!: () => void;
      const firstTokens = new Promise<void>((r) => {
        started = r;
      });
      let count = 0;
      pending.push(gen.generate({ ...params(i), onToken: () => ++count === 3 && started() }));
      await firstTokens;
    }
    const together = await Promise.all(pending);
    const stepsTogether = gen.steps - stepsAlone;
    together.forEach((r, i) => {
      expect(r.tokenIds).toEqual(alone[i]!.tokenIds);
      for (const [j, t] of r.tokens.entries()) expect(t.logprob).toBeCloseTo(alone[i]!.tokens[j]!.logprob, 4);
      expect(r.finishReason).toBe("length");
    });
    // Equal-length prompts arriving together are prefilled in one pass: still the same results.
    const twins = [0, 1, 2].map((i) => ({
      promptIds: ids[3]!,
      seed: 500 + i,
      maxTokens: 6,
      ignoreEos: true,
    }));
    const twinsAlone: GenerateResult[] = [];
    for (const t of twins) twinsAlone.push(await gen.generate(t));
    const twinsTogether = await gen.generateMany(twins);
    twinsTogether.forEach((r, i) => {
      expect(r.tokenIds).toEqual(twinsAlone[i]!.tokenIds);
    });
    // Batched: far fewer decode steps than running them one after another.
    expect(stepsTogether).toBeLessThan(stepsAlone * 0.7);
    expect(gen.activeCount).toBe(0);
    model.dispose();
  });

  it("raw logprobs match a separate forward pass; sampling logprobs follow the temperature", async () => {
    const { model, tokenizer, template } = await tinySetup(22);
    const gen = new Generator(model, tokenizer);
    const promptIds = template.encodeChat([{ role: "user", content: "hello" }]).ids;
    const r = await gen.generate({ promptIds, seed: 1, maxTokens: 12, temperature: 0.7, ignoreEos: true });
    const full = tf.tidy(() => model.tokenLogProbs([[...promptIds, ...r.tokenIds]]).arraySync()[0]!);
    const scaled = tf.tidy(
      () =>
        model.tokenLogProbs([[...promptIds, ...r.tokenIds]], undefined, { temperature: 0.7 }).arraySync()[0]!,
    );
    r.tokens.forEach((t, j) => {
      expect(Math.abs(t.logprob - full[promptIds.length - 1 + j]!)).toBeLessThan(1e-4);
      expect(Math.abs(t.samplingLogprob - scaled[promptIds.length - 1 + j]!)).toBeLessThan(1e-4);
    });
    model.dispose();
  });

  it("honours stop strings, eos and the context limit", async () => {
    const { model, tokenizer } = await tinySetup(23, 40);
    const gen = new Generator(model, tokenizer);
    const promptIds = [tokenizer.bosId, ...tokenizer.encode("abc")];
    const free = await gen.generate({ promptIds, seed: 5, maxTokens: 30, ignoreEos: true });
    const stopChar = free.text.slice(4, 6);
    const stopped = await gen.generate({
      promptIds,
      seed: 5,
      maxTokens: 30,
      ignoreEos: true,
      stop: [stopChar],
    });
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.text).toBe(free.text.slice(0, free.text.indexOf(stopChar)));
    const streamed: string[] = [];
    await gen.generate({
      promptIds,
      seed: 5,
      maxTokens: 30,
      ignoreEos: true,
      stop: [stopChar],
      onToken: (e) => streamed.push(e.textDelta),
    });
    expect(streamed.join("")).toBe(stopped.text);
    const long = await gen.generate({ promptIds, seed: 5, maxTokens: 1000, ignoreEos: true });
    expect(long.finishReason).toBe("length");
    expect(promptIds.length + long.tokenIds.length).toBe(40);
    const greedy = await gen.generate({ promptIds, temperature: 0, maxTokens: 5, ignoreEos: true });
    const greedy2 = await gen.generate({ promptIds, temperature: 0, maxTokens: 5, ignoreEos: true, seed: 9 });
    expect(greedy.tokenIds).toEqual(greedy2.tokenIds);
    await expect(gen.generate({ promptIds: new Array(40).fill(5) })).rejects.toThrow(/context/);
    await expect(gen.generate({ promptIds: [1, tokenizer.vocabSize] })).rejects.toThrow(
      /promptIds must be integers/,
    );
    model.dispose();
  });

  it("swapWeights drains running sequences, queues new ones, and bumps the version", async () => {
    const { model, tokenizer } = await tinySetup(24);
    const trained = model.clone();
    tf.tidy(() => trained.variable("head").assign(tf.mul(trained.variable("head"), 3)));
    const gen = new Generator(model, tokenizer);
    const promptIds = [tokenizer.bosId, ...tokenizer.encode("hey")];
    const running = gen.generate({ promptIds, seed: 1, maxTokens: 20, ignoreEos: true });
    await new Promise((r) => setTimeout(r, 5));
    const swap = gen.swapWeights(trained);
    const late = gen.generate({ promptIds, seed: 1, maxTokens: 20, ignoreEos: true });
    const [before, after, version] = await Promise.all([running, late, swap]);
    expect(version).toBe(1);
    expect(before.modelVersion).toBe(0);
    expect(before.tokenIds).toHaveLength(20);
    expect(after.modelVersion).toBe(1);
    expect(after.tokenIds).toHaveLength(20);
    await gen.pause();
    gen.resume({ weightsChanged: true });
    expect(gen.version).toBe(2);
    gen.resume();
    expect(gen.version).toBe(2);
    const group = await gen.generateMany([0, 1].map((i) => ({ promptIds, seed: i, maxTokens: 3 })));
    expect(group.map((g) => g.modelVersion)).toEqual([2, 2]);
    const ctrl = new AbortController();
    const aborted = gen.generate({ promptIds, maxTokens: 100, ignoreEos: true, signal: ctrl.signal });
    setTimeout(() => ctrl.abort(), 5);
    expect((await aborted).finishReason).toBe("abort");
    model.dispose();
    trained.dispose();
  });
});

describe("sampleToken", () => {
  it("top-k 1 is greedy and top-p keeps the nucleus", () => {
    const logits = [0, 3, 1, 2];
    const rng = createRng(1);
    for (let i = 0; i < 20; i++)
      expect(sampleToken(logits, { temperature: 1, topK: 1, topP: 1 }, rng).id).toBe(1);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++)
      seen.add(sampleToken(logits, { temperature: 1, topK: 0, topP: 0.7 }, rng).id);
    // p = [.03,.64,.09,.24]: the 0.7 nucleus is {1, 3}.
    expect([...seen].sort()).toEqual([1, 3]);
    const s = sampleToken(logits, { temperature: 1, topK: 2, topP: 1 }, rng);
    const z = Math.exp(3) + Math.exp(2);
    expect(s.samplingLogprob).toBeCloseTo(logits[s.id]! - Math.log(z), 6);
  });
});
