import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { UnknownAdapterError } from "./adapter-rows.js";
import { adapterView } from "./adapter-view.js";
import { loadPretrained } from "./load.js";
import { addLoraAdapter, applyLora, removeLoraAdapter } from "./lora.js";
import { exportPeftAdapter, loadPeftAdapter } from "./peft.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

let root: string;
const IDS = [
  [1, 17, 100, 5, 99, 3, 120, 42],
  [4, 8, 15, 16, 23, 42, 7, 9],
  [3, 1, 4, 1, 5, 9, 2, 6],
  [2, 7, 1, 8, 2, 8, 1, 8],
];
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-multi-lora-"));
  await writeRandomCheckpoint(join(root, "base"), {
    family: "qwen3",
    seed: 3,
    vocabSize: 128,
    initStd: 0.15,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Non-zero B matrices, so each adapter computes its own function. */
function perturb(model: PretrainedModel, name: string, seed: number): void {
  let i = 0;
  for (const w of model.adapters.get(name)!.weights.values())
    w.b.assign(tf.randomNormal(w.b.shape, 0, 0.2, "float32", seed * 100 + i++));
}

async function twoAdapters(): Promise<PretrainedModel> {
  const { model } = await loadPretrained(join(root, "base"));
  addLoraAdapter(model, "planner", { rank: 4, alpha: 8, seed: 1 });
  addLoraAdapter(model, "checker", { rank: 2, alpha: 4, seed: 2, targetModules: ["q_proj", "down_proj"] });
  perturb(model, "planner", 1);
  perturb(model, "checker", 2);
  return model;
}

const rowsOf = (t: tf.Tensor) => (t.arraySync() as number[][][]).map((r) => r.flat());
const maxDiff = (a: number[], b: number[]) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i]!)), 0);

describe("several LoRA adapters over one base", () => {
  it("a batch mixing adapters and base-only rows equals each row run alone", async () => {
    const model = await twoAdapters();
    const selection = ["planner", "checker", null, "planner"];
    const mixed = tf.tidy(() => rowsOf(model.forwardLogits(IDS, undefined, selection)));
    const alone = (name: string | null, row: number) =>
      tf.tidy(() => rowsOf(model.forwardLogits([IDS[row]!], undefined, name ?? false))[0]!);
    selection.forEach((name, row) => {
      expect(maxDiff(mixed[row]!, alone(name, row))).toBeLessThan(1e-5);
    });
    // The adapters really differ from each other and from the base.
    expect(maxDiff(alone("planner", 0), alone("checker", 0))).toBeGreaterThan(1e-2);
    expect(maxDiff(alone("planner", 0), alone(null, 0))).toBeGreaterThan(1e-2);
    model.dispose();
  });

  it("prefill and decode with a per-row selection match a single-adapter run (the generator's path)", async () => {
    const model = await twoAdapters();
    const selection = ["checker", null, "planner"];
    const prompts = IDS.slice(0, 3);
    const { logits, cache } = model.prefillMany(prompts, selection);
    const V = model.config.vocabSize;
    const bias = tf.zeros([3, 1, 1, prompts[0]!.length + 1]) as tf.Tensor4D;
    const step = model.decodeStep([5, 6, 7], [8, 8, 8], cache, bias, selection);
    selection.forEach((name, row) => {
      const view = name ? adapterView(model, name) : model.frozenReference();
      const one = view.prefillMany([prompts[row]!]);
      expect(maxDiff([...logits.subarray(row * V, (row + 1) * V)], [...one.logits])).toBeLessThan(1e-5);
      const oneBias = tf.zeros([1, 1, 1, prompts[0]!.length + 1]) as tf.Tensor4D;
      const next = view.decodeStep([5 + row], [8], one.cache, oneBias);
      expect(maxDiff([...step.logits.subarray(row * V, (row + 1) * V)], [...next.logits])).toBeLessThan(1e-5);
      tf.dispose([
        oneBias,
        ...one.cache.flatMap((c) => [c.k, c.v]),
        ...next.cache.flatMap((c) => [c.k, c.v]),
      ]);
    });
    tf.dispose([bias, ...cache.flatMap((c) => [c.k, c.v]), ...step.cache.flatMap((c) => [c.k, c.v])]);
    model.dispose();
  });

  it("each adapter costs only its own A/B matrices: one copy of the base", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    const base = model.weightNames.reduce((n, name) => n + model.variable(name).size, 0);
    const before = tf.memory();
    addLoraAdapter(model, "a", { rank: 4 });
    const afterA = tf.memory();
    addLoraAdapter(model, "b", { rank: 4 });
    addLoraAdapter(model, "c", { rank: 4 });
    const after = tf.memory();
    const adapterFloats = model.adapters.get("a")!.weights.size
      ? [...model.adapters.get("a")!.weights.values()].reduce((n, w) => n + w.a.size + w.b.size, 0)
      : 0;
    expect(afterA.numBytes - before.numBytes).toBe(adapterFloats * 4);
    expect(after.numBytes - before.numBytes).toBe(3 * adapterFloats * 4);
    // 2 variables per adapted site and adapter; the base weights are not copied.
    const sites = model.adapters.get("a")!.weights.size;
    expect(after.numTensors - before.numTensors).toBe(3 * 2 * sites);
    // Three adapters together cost less than one more copy of the base would.
    expect(after.numBytes - before.numBytes).toBeLessThan(base * 4);
    expect(model.parameterCount).toBe(base + 3 * adapterFloats);
    // The base is frozen; every adapter's variables are distinct objects.
    expect(model.weightNames.every((n) => !model.variable(n).trainable)).toBe(true);
    const vars = ["a", "b", "c"].flatMap((n) => adapterView(model, n).trainableVariables);
    expect(new Set(vars).size).toBe(3 * 2 * sites);
    removeLoraAdapter(model, "b");
    expect(tf.memory().numBytes - before.numBytes).toBe(2 * adapterFloats * 4);
    model.dispose();
  });

  it("an unknown adapter is a typed error naming it; a duplicate or bad name is refused", async () => {
    const model = await twoAdapters();
    expect(() => tf.tidy(() => model.forwardLogits(IDS, undefined, ["planner", "nope", null, null]))).toThrow(
      UnknownAdapterError,
    );
    expect(() => adapterView(model, "nope")).toThrow(/No LoRA adapter "nope".*planner/);
    expect(() => addLoraAdapter(model, "planner")).toThrow(/already has an adapter/);
    expect(() => addLoraAdapter(model, "a b")).toThrow(/invalid adapter name/);
    expect(() => tf.tidy(() => model.forwardLogits(IDS, undefined, ["planner"]))).toThrow(
      /1 entries for 4 rows/,
    );
    // The default adapter coexists with named ones and is what an unselected row runs.
    applyLora(model, { rank: 2, seed: 9 });
    perturb(model, "default", 9);
    const mixed = tf.tidy(() =>
      rowsOf(model.forwardLogits(IDS.slice(0, 2), undefined, [undefined, "checker"])),
    );
    const dflt = tf.tidy(() => rowsOf(model.logits([IDS[0]!]))[0]!);
    expect(maxDiff(mixed[0]!, dflt)).toBeLessThan(1e-5);
    model.dispose();
  });

  it("each adapter exports as its own PEFT folder that loads back onto the base", async () => {
    const model = await twoAdapters();
    for (const name of ["planner", "checker"]) {
      const dir = join(root, `peft-${name}`);
      await exportPeftAdapter(model, dir, { adapter: name });
      const { model: fresh } = await loadPretrained(join(root, "base"));
      await loadPeftAdapter(fresh, dir);
      const want = tf.tidy(() => rowsOf(adapterView(model, name).logits(IDS)));
      const got = tf.tidy(() => rowsOf(fresh.logits(IDS)));
      want.forEach((row, i) => {
        expect(maxDiff(row, got[i]!)).toBeLessThan(1e-5);
      });
      fresh.dispose();
    }
    model.dispose();
  });

  it("a view trains only its adapter: gradients reach its A/B and no other variable", async () => {
    const model = await twoAdapters();
    const view = adapterView(model, "planner");
    const other = adapterView(model, "checker");
    const snapshot = other.trainableVariables.map((v) => Float32Array.from(v.dataSync()));
    const { grads } = tf.variableGrads(
      () => tf.mean(view.tokenLogProbs(IDS)) as tf.Scalar,
      view.trainableVariables,
    );
    expect(Object.keys(grads).sort()).toEqual(view.trainableVariables.map((v) => v.name).sort());
    const opt = tf.train.sgd(0.1);
    opt.applyGradients(grads);
    tf.dispose(Object.values(grads));
    other.trainableVariables.forEach((v, i) => {
      expect(Float32Array.from(v.dataSync())).toEqual(snapshot[i]);
    });
    opt.dispose();
    model.dispose();
  });
});
