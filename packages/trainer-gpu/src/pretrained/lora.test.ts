import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { sft } from "../sft/sft.js";
import { CALC_TOOL } from "../test-support/tiny.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { exportPretrained } from "./export.js";
import { loadPretrained } from "./load.js";
import { applyLora, mergeLora } from "./lora.js";
import { exportPeftAdapter, loadPeftAdapter } from "./peft.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";
import { readSafetensors, readSafetensorsHeader } from "./safetensors.js";
import { ReferenceLM } from "./test-support/reference-lm.js";

let root: string;
const IDS = [[1, 17, 100, 5, 99, 3, 120, 42, 7]];
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-hf-lora-"));
  await writeRandomCheckpoint(join(root, "base"), {
    family: "qwen2",
    seed: 1,
    vocabSize: 128,
    initStd: 0.15,
  });
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const logitsOf = (m: { logits(ids: number[][]): tf.Tensor3D }) =>
  tf.tidy(() => Float32Array.from(m.logits(IDS).dataSync()));
const maxDiff = (a: Float32Array, b: Float32Array) =>
  a.reduce((m, x, i) => Math.max(m, Math.abs(x - (b[i] as number))), 0);

/** Give every adapter a non-zero B so the adapters change the function. */
function perturbAdapters(model: Awaited<ReturnType<typeof loadPretrained>>["model"], seed = 1): void {
  let i = 0;
  for (const w of model.lora!.weights.values())
    w.b.assign(tf.randomNormal(w.b.shape, 0, 0.2, "float32", seed * 100 + i++));
}

describe("LoRA", () => {
  it("a fresh adapter (B = 0) leaves the logits unchanged; only adapters are trainable", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    const before = logitsOf(model);
    applyLora(model, { rank: 4, alpha: 8, targetModules: ["q_proj", "v_proj", "down_proj"] });
    expect(maxDiff(logitsOf(model), before)).toBe(0);
    const names = model.trainableVariables.map((v) => v.name);
    expect(names).toHaveLength(2 * 3 * 2); // 2 layers x 3 modules x (A, B)
    expect(names.every((n) => /lora_[AB]$/.test(n))).toBe(true);
    expect(model.weightNames.every((n) => model.variable(n).trainable === false)).toBe(true);
    perturbAdapters(model);
    expect(maxDiff(logitsOf(model), before)).toBeGreaterThan(1e-3);
    // The KL reference is the base with adapters off, sharing the weights.
    const ref = model.frozenReference();
    expect(maxDiff(logitsOf(ref), before)).toBe(0);
    expect(ref.trainableVariables).toHaveLength(0);
    model.dispose();
  });

  it("a frozen tied head follows weight changes (setWeightsFrom, clone)", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    applyLora(model, { rank: 2 });
    const before = logitsOf(model); // caches the transposed (frozen) embedding
    const other = (await loadPretrained(join(root, "base"))).model;
    const e = other.variable("model.embed_tokens.weight");
    e.assign(tf.mul(e, 1.5));
    applyLora(other, { rank: 2 });
    model.setWeightsFrom(other);
    const after = logitsOf(model);
    expect(maxDiff(after, before)).toBeGreaterThan(1e-3);
    expect(maxDiff(after, logitsOf(other))).toBe(0);
    const copy = model.clone();
    expect(maxDiff(logitsOf(copy), after)).toBe(0);
    for (const m of [model, other, copy]) m.dispose();
  });

  it("matches the float64 reference with W + (alpha/r) B A computed independently", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    applyLora(model, { rank: 2, alpha: 6, targetModules: ["k_proj", "o_proj", "gate_proj"] });
    perturbAdapters(model, 2);
    await exportPeftAdapter(model, join(root, "adapter-ref"));
    const adapter = await readSafetensors(join(root, "adapter-ref", "adapter_model.safetensors"));
    const base = await ReferenceLM.load(join(root, "base"));
    const baseTensors = await readSafetensors(join(root, "base", "model.safetensors"));
    const merged = new Map<string, { shape: number[]; data: Float32Array }>();
    for (const [key, a] of adapter) {
      if (!key.endsWith("lora_A.weight")) continue;
      const b = adapter.get(key.replace("lora_A", "lora_B"))!;
      const name = key.replace("base_model.model.", "").replace(".lora_A", "");
      const w = baseTensors.get(name)!;
      const [out, inF] = w.shape as [number, number];
      const r = a.shape[0] as number;
      const data = Float32Array.from(w.data);
      for (let o = 0; o < out; o++)
        for (let i = 0; i < inF; i++) {
          let s = 0;
          for (let k = 0; k < r; k++) s += (b.data[o * r + k] as number) * (a.data[k * inF + i] as number);
          data[o * inF + i] = (data[o * inF + i] as number) + (6 / 2) * s;
        }
      merged.set(name, { shape: w.shape, data });
    }
    const ref = base
      .withTensors(merged)
      .forward(IDS[0] as number[])
      .flatMap((r) => Array.from(r));
    const ours = logitsOf(model);
    expect(maxDiff(ours, Float32Array.from(ref))).toBeLessThan(1e-4);
    model.dispose();
  });

  it("exports PEFT key names and adapter_config, and loads back to the same logits", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    applyLora(model, {
      rank: 4,
      alpha: 16,
      targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"],
    });
    perturbAdapters(model, 3);
    const dir = join(root, "adapter");
    await exportPeftAdapter(model, dir, { baseModelNameOrPath: "Qwen/Qwen2.5-0.5B-Instruct" });
    const cfg = JSON.parse(await readFile(join(dir, "adapter_config.json"), "utf8"));
    expect(cfg).toMatchObject({
      peft_type: "LORA",
      task_type: "CAUSAL_LM",
      r: 4,
      lora_alpha: 16,
      target_modules: ["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"],
      base_model_name_or_path: "Qwen/Qwen2.5-0.5B-Instruct",
      bias: "none",
      use_rslora: false,
    });
    const header = await readSafetensorsHeader(join(dir, "adapter_model.safetensors"));
    expect(header.metadata.format).toBe("pt");
    expect(
      header.entries.get("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight")?.shape,
    ).toEqual([4, 32]);
    expect(header.entries.get("base_model.model.model.layers.1.mlp.up_proj.lora_B.weight")?.shape).toEqual([
      64, 4,
    ]);
    expect(
      header.entries.get("base_model.model.model.layers.0.self_attn.k_proj.lora_B.weight")?.shape,
    ).toEqual([16, 4]);
    expect(header.entries.size).toBe(2 * 5 * 2);

    const fresh = (await loadPretrained(join(root, "base"))).model;
    await loadPeftAdapter(fresh, dir);
    expect(maxDiff(logitsOf(fresh), logitsOf(model))).toBe(0);
    fresh.dispose();
    model.dispose();
  });

  it("merged export equals the unmerged model; mergeLora in place too", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    applyLora(model, { rank: 3, alpha: 5 });
    perturbAdapters(model, 4);
    const adapted = logitsOf(model);
    await exportPretrained(model, join(root, "merged"));
    const merged = (await loadPretrained(join(root, "merged"))).model;
    expect(merged.lora).toBeNull();
    expect(maxDiff(logitsOf(merged), adapted)).toBeLessThan(1e-5);
    mergeLora(model);
    expect(model.lora).toBeNull();
    expect(model.trainableVariables).toHaveLength(model.weightNames.length);
    expect(maxDiff(logitsOf(model), adapted)).toBeLessThan(1e-5);
    merged.dispose();
    model.dispose();
  });

  it("sft() trains only the adapters (base weights bit-identical) and lowers the loss", async () => {
    const { model } = await loadPretrained(join(root, "base"));
    applyLora(model, { rank: 4, alpha: 8 });
    const base = new Map(model.weightNames.map((n) => [n, Float32Array.from(model.variable(n).dataSync())]));
    const tokenizer = new Tokenizer();
    const template = new ChatTemplate(tokenizer);
    const data = [1, 2, 3, 4].map((i) => ({
      tools: [CALC_TOOL],
      messages: [
        { role: "user" as const, content: `${i}+${i}?` },
        { role: "assistant" as const, content: `It is ${2 * i}.` },
      ],
    }));
    const result = await sft(model, data, {
      template,
      steps: 12,
      batchSize: 4,
      learningRate: 1e-2,
      log: () => {},
    });
    expect(result.losses.at(-1)!).toBeLessThan(result.losses[0]! * 0.8);
    for (const [n, before] of base)
      expect(maxDiff(Float32Array.from(model.variable(n).dataSync()), before)).toBe(0);
    // Adam state only for the adapters.
    const weights = await result.optimizer.getWeights();
    const slots = weights.filter((w) => w.name !== "iter");
    expect(slots).toHaveLength(2 * model.trainableVariables.length);
    result.optimizer.dispose();
    model.dispose();
  });
});
