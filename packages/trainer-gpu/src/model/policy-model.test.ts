import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, describe, expect, it } from "vitest";
import { microModel, tinySetup } from "../test-support/tiny.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { CheckpointError, loadCheckpoint, saveCheckpoint } from "./checkpoint.js";
import { PolicyModel } from "./policy-model.js";

const dirs: string[] = [];
async function tmp(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "agl-ckpt-"));
  dirs.push(d);
  return d;
}
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

const batch = [
  [1, 20, 30, 40, 50, 60, 70],
  [1, 21, 31, 41, 51, 61, 71],
];
const arr = (t: tf.Tensor) => Array.from(t.dataSync());

function adamStep(model: PolicyModel, opt: tf.Optimizer) {
  const loss = opt.minimize(
    () => tf.neg(tf.mean(model.tokenLogProbs(batch))) as tf.Scalar,
    true,
    model.trainableVariables,
  );
  loss?.dispose();
}

describe("PolicyModel", () => {
  it("initialises deterministically from the seed and reports its size", async () => {
    const { model, tokenizer } = await tinySetup(5);
    const again = PolicyModel.create(model.config);
    const other = PolicyModel.create({ ...model.config, seed: 6 });
    const a = tf.tidy(() => arr(model.logits(batch)));
    expect(tf.tidy(() => arr(again.logits(batch)))).toEqual(a);
    expect(tf.tidy(() => arr(other.logits(batch)))).not.toEqual(a);
    const d = 32;
    const V = tokenizer.vocabSize;
    expect(model.parameterCount).toBe(V * d + 128 * d + 2 * (12 * d * d + 9 * d) + 2 * d + d * V);
    expect(tf.tidy(() => model.logits(batch).shape)).toEqual([2, 7, V]);
    for (const m of [model, again, other]) m.dispose();
  });

  it("KV-cached decoding reproduces the full forward pass", async () => {
    const { model } = await tinySetup(7);
    const ids = batch[0]!;
    const full = tf.tidy(() => model.logits([ids]).arraySync()[0]!);
    const { logits, cache } = model.prefill(ids.slice(0, 3));
    expect(Array.from(logits)[5]).toBeCloseTo(full[2]![5]!, 4);
    let c = cache;
    for (let p = 3; p < ids.length; p++) {
      const bias = tf.zeros([1, 1, 1, p + 1]) as tf.Tensor4D;
      const r = model.decodeStep([ids[p]!], [p], c, bias);
      tf.dispose([bias, ...c.flatMap((e) => [e.k, e.v])]);
      c = r.cache;
      const expected = full[p]!;
      const maxDiff = Math.max(...Array.from(r.logits).map((x, i) => Math.abs(x - expected[i]!)));
      expect(maxDiff).toBeLessThan(1e-4);
    }
    tf.dispose(c.flatMap((e) => [e.k, e.v]));
    model.dispose();
  });

  it("an attention mask makes left padding invisible", async () => {
    const { model } = await tinySetup(8);
    const row = [1, 22, 33, 44, 55];
    const alone = tf.tidy(() => model.tokenLogProbs([row]).arraySync()[0]!);
    const padded = tf.tidy(
      () => model.tokenLogProbs([[0, 0, ...row]], [[0, 0, 1, 1, 1, 1, 1]]).arraySync()[0]!,
    );
    for (const [i, v] of padded.slice(2).entries()) expect(v).toBeCloseTo(alone[i]!, 4);
    model.dispose();
  });

  it("tokenLogProbs is differentiable, and clone/setWeightsFrom copy weights independently", async () => {
    const { model } = await tinySetup(9);
    const ref = model.clone({ trainable: false });
    const before = tf.tidy(() => arr(ref.tokenLogProbs(batch)));
    const opt = tf.train.adam(1e-2);
    adamStep(model, opt);
    expect(tf.tidy(() => arr(ref.tokenLogProbs(batch)))).toEqual(before);
    expect(tf.tidy(() => arr(model.tokenLogProbs(batch)))).not.toEqual(before);
    ref.setWeightsFrom(model);
    expect(tf.tidy(() => arr(ref.tokenLogProbs(batch)))).toEqual(
      tf.tidy(() => arr(model.tokenLogProbs(batch))),
    );
    const { logProbs, entropy } = tf.tidy(() => model.tokenLogProbsWithEntropy(batch));
    expect(entropy.shape).toEqual([2, 6]);
    expect(Math.min(...arr(entropy))).toBeGreaterThan(0);
    tf.dispose([logProbs, entropy]);
    model.dispose();
    ref.dispose();
  });

  it("save/load reproduces identical logits and optimizer state", async () => {
    const { model, tokenizer, template } = await tinySetup(10);
    const opt = tf.train.adam(1e-2);
    adamStep(model, opt);
    const dir = await tmp();
    await saveCheckpoint(dir, model, { tokenizer, template, optimizer: opt, metadata: { step: 1 } });
    const loaded = await loadCheckpoint(dir);
    expect(tf.tidy(() => arr(loaded.model.logits(batch)))).toEqual(tf.tidy(() => arr(model.logits(batch))));
    expect(loaded.metadata).toEqual({ step: 1 });
    expect(loaded.tokenizer.toConfig()).toEqual(tokenizer.toConfig());
    // The same next step from both (optimizer moments restored) gives the same weights.
    const opt2 = tf.train.adam(1e-2);
    expect(await loaded.restoreOptimizer(opt2)).toBe(true);
    adamStep(model, opt);
    adamStep(loaded.model, opt2);
    const a = tf.tidy(() => arr(model.logits(batch)));
    const b = tf.tidy(() => arr(loaded.model.logits(batch)));
    expect(Math.max(...a.map((x, i) => Math.abs(x - b[i]!)))).toBeLessThan(1e-5);
    model.dispose();
    loaded.model.dispose();
  });

  it("tied embeddings: no head weight, logits are h . E^T, the output gradient reaches the embedding, checkpoints keep the tie", async () => {
    const { tokenizer, template } = await tinySetup(12);
    const model = PolicyModel.create({
      vocabSize: tokenizer.vocabSize,
      dModel: 16,
      nLayers: 1,
      nHeads: 2,
      contextLength: 32,
      seed: 4,
      tieEmbeddings: true,
    });
    expect(model.weightNames).not.toContain("head");
    // Independent of the model's own head path: the final hidden states times the embedding, in float64.
    const h = tf.tidy(() => model.hidden(batch).arraySync() as number[][][]);
    const E = model.variable("tok_emb").arraySync() as number[][];
    const logits = tf.tidy(() => model.logits(batch).arraySync() as number[][][]);
    for (const [b, row] of h.entries()) {
      for (const [t, vec] of row.entries()) {
        for (const v of [0, 7, tokenizer.vocabSize - 1]) {
          const ref = vec.reduce((a, x, k) => a + x * E[v]![k]!, 0);
          expect(logits[b]![t]![v]).toBeCloseTo(ref, 4);
        }
      }
    }
    // A token that never appears in the input still gets an embedding gradient: through the output head.
    const unseen = tokenizer.vocabSize - 1;
    const grads = tf.variableGrads(
      () => tf.neg(tf.mean(model.tokenLogProbs(batch))) as tf.Scalar,
      [model.variable("tok_emb")],
    );
    const g = grads.grads[model.variable("tok_emb").name]!.arraySync() as number[][];
    expect(g[unseen]!.some((x) => x !== 0)).toBe(true);
    tf.dispose([grads.value, ...Object.values(grads.grads)]);
    const dir = await tmp();
    await saveCheckpoint(dir, model, { tokenizer, template });
    const loaded = await loadCheckpoint(dir);
    expect(loaded.model.config.tieEmbeddings).toBe(true);
    expect(tf.tidy(() => arr(loaded.model.logits(batch)))).toEqual(tf.tidy(() => arr(model.logits(batch))));
    model.dispose();
    loaded.model.dispose();
  });

  it("a tokenizer with multi-character pieces survives save/load: same vocabulary, same ids", async () => {
    const tokenizer = new Tokenizer({ chars: "abc 0123456789+=", pieces: ["123", "45", "ab c"] });
    const template = new ChatTemplate(tokenizer);
    const model = microModel(tokenizer.vocabSize, 2);
    const dir = await tmp();
    await saveCheckpoint(dir, model, { tokenizer, template });
    const loaded = await loadCheckpoint(dir);
    expect(loaded.tokenizer.vocabSize).toBe(tokenizer.vocabSize);
    const text = "ab c 12345+45=123";
    expect(loaded.tokenizer.encode(text)).toEqual(tokenizer.encode(text));
    expect(loaded.tokenizer.encode(text).length).toBeLessThan(text.length);
    model.dispose();
    loaded.model.dispose();
  });

  it("a corrupted or mismatched checkpoint fails with a clear error", async () => {
    const { model, tokenizer } = await tinySetup(11);
    const dir = await tmp();
    await saveCheckpoint(dir, model, { tokenizer });
    const weights = await readFile(join(dir, "weights.bin"));
    weights[100] = (weights[100]! + 1) % 256;
    await writeFile(join(dir, "weights.bin"), weights);
    await expect(loadCheckpoint(dir)).rejects.toThrow(/weights\.bin is corrupted/);
    await expect(loadCheckpoint(dir)).rejects.toBeInstanceOf(CheckpointError);
    expect(CheckpointError.isInstance(await loadCheckpoint(dir).catch((e) => e))).toBe(true);

    await writeFile(join(dir, "weights.bin"), weights.subarray(0, 50));
    await expect(loadCheckpoint(dir)).rejects.toThrow(CheckpointError);

    const manifest = JSON.parse(await readFile(join(dir, "policy.json"), "utf8"));
    await writeFile(join(dir, "policy.json"), JSON.stringify({ ...manifest, formatVersion: 99 }));
    await expect(loadCheckpoint(dir)).rejects.toThrow(/format version 99 is not supported/);
    await writeFile(join(dir, "policy.json"), "{not json");
    await expect(loadCheckpoint(dir)).rejects.toThrow(/policy\.json is missing or not JSON/);
    await expect(loadCheckpoint(join(dir, "nope"))).rejects.toThrow(CheckpointError);
    model.dispose();
  });
});
