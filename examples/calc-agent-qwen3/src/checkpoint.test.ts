import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  applyLora,
  exportPeftAdapter,
  exportPretrained,
  loadPretrainedPolicy,
  readSafetensors,
  selectBackend,
  tf,
} from "@agl/trainer-gpu";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MODEL_SHAPE, writeInitialCheckpoint } from "./checkpoint.js";

/**
 * The job's checkpoint files in the Hugging Face layout, and its two exports (merged folder, PEFT
 * adapter) checked against an independent float64 merge of the adapter into the base.
 */

let root: string;
let dir: string;
beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  root = await mkdtemp(join(tmpdir(), "calc-ckpt-"));
  dir = join(root, "initial");
  await writeInitialCheckpoint(dir, 4);
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

const readJson = async (file: string) => JSON.parse(await readFile(file, "utf8"));

/** transformers' parameter names for Qwen3ForCausalLM with tied embeddings (no lm_head.weight). */
function qwen3Names(layers: number): string[] {
  const perLayer = [
    "input_layernorm.weight",
    "mlp.down_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "post_attention_layernorm.weight",
    "self_attn.k_norm.weight",
    "self_attn.k_proj.weight",
    "self_attn.o_proj.weight",
    "self_attn.q_norm.weight",
    "self_attn.q_proj.weight",
    "self_attn.v_proj.weight",
  ];
  const names = ["model.embed_tokens.weight", "model.norm.weight"];
  for (let i = 0; i < layers; i++) names.push(...perLayer.map((n) => `model.layers.${i}.${n}`));
  return names.sort();
}

describe("the job's Qwen3 checkpoint", () => {
  it("is a Hugging Face folder: Qwen3 config, transformers' weight names and shapes, eos ids of the tokenizer", async () => {
    expect((await readdir(dir)).sort()).toEqual([
      "config.json",
      "generation_config.json",
      "model.safetensors",
      "tokenizer.json",
      "tokenizer_config.json",
    ]);
    const config = await readJson(join(dir, "config.json"));
    expect(config).toMatchObject({
      architectures: ["Qwen3ForCausalLM"],
      model_type: "qwen3",
      hidden_size: MODEL_SHAPE.hiddenSize,
      num_hidden_layers: MODEL_SHAPE.numLayers,
      head_dim: MODEL_SHAPE.headDim,
      tie_word_embeddings: true,
    });
    const tensors = await readSafetensors(join(dir, "model.safetensors"));
    expect([...tensors.keys()].sort()).toEqual(qwen3Names(MODEL_SHAPE.numLayers));
    const h = MODEL_SHAPE.hiddenSize;
    const q = MODEL_SHAPE.numHeads * MODEL_SHAPE.headDim;
    const kv = MODEL_SHAPE.numKvHeads * MODEL_SHAPE.headDim;
    expect(tensors.get("model.embed_tokens.weight")!.shape).toEqual([config.vocab_size, h]);
    expect(tensors.get("model.layers.1.self_attn.q_proj.weight")!.shape).toEqual([q, h]);
    expect(tensors.get("model.layers.1.self_attn.k_proj.weight")!.shape).toEqual([kv, h]);
    expect(tensors.get("model.layers.1.self_attn.q_norm.weight")!.shape).toEqual([MODEL_SHAPE.headDim]);
    expect(tensors.get("model.layers.0.mlp.down_proj.weight")!.shape).toEqual([
      h,
      MODEL_SHAPE.intermediateSize,
    ]);

    const tokenizer = await readJson(join(dir, "tokenizer.json"));
    const idOf = (s: string) => tokenizer.added_tokens.find((t: { content: string }) => t.content === s).id;
    const generation = await readJson(join(dir, "generation_config.json"));
    expect(generation.eos_token_id).toEqual([idOf("<|im_end|>"), idOf("<|endoftext|>")]);
    expect(config.eos_token_id).toBe(idOf("<|im_end|>"));
    expect(config.vocab_size).toBe(Math.max(...tokenizer.added_tokens.map((t: { id: number }) => t.id)) + 1);
    expect(generation).toMatchObject({ do_sample: true, temperature: 1, top_p: 1, top_k: 0 });
  });

  it("exports the LoRA-trained policy as a merged folder and a PEFT adapter that agree with a float64 merge", async () => {
    const policy = await loadPretrainedPolicy(dir);
    expect(policy.modelName).toBe("calc-agent-qwen3");
    applyLora(policy.model, { rank: 4, alpha: 8, seed: 2 });
    // B starts at zero: give the adapters values, as training would.
    for (const w of policy.model.lora!.weights.values())
      w.b.assign(tf.randomNormal(w.b.shape, 0, 0.1, "float32", 7));
    const merged = join(root, "merged");
    const adapter = join(root, "adapter");
    await exportPretrained(policy.model, merged);
    await exportPeftAdapter(policy.model, adapter, { baseModelNameOrPath: dir });
    policy.model.dispose();

    expect((await readdir(merged)).sort()).toEqual((await readdir(dir)).sort());
    expect((await readdir(adapter)).sort()).toEqual(["adapter_config.json", "adapter_model.safetensors"]);
    const cfg = await readJson(join(adapter, "adapter_config.json"));
    expect(cfg).toMatchObject({ peft_type: "LORA", r: 4, lora_alpha: 8, base_model_name_or_path: dir });
    const base = await readSafetensors(join(dir, "model.safetensors"));
    const out = await readSafetensors(join(merged, "model.safetensors"));
    const lora = await readSafetensors(join(adapter, "adapter_model.safetensors"));
    expect([...out.keys()].sort()).toEqual([...base.keys()].sort());
    const adapted = [...lora.keys()].filter((k) => k.endsWith(".lora_A.weight"));
    expect(adapted).toHaveLength(7 * MODEL_SHAPE.numLayers);
    const scale = 8 / 4;
    let maxErr = 0;
    for (const keyA of adapted) {
      const module = keyA.slice("base_model.model.".length, -".lora_A.weight".length);
      const A = lora.get(keyA)!; // [r, in]
      const B = lora.get(keyA.replace("lora_A", "lora_B"))!; // [out, r]
      const W = base.get(`${module}.weight`)!; // [out, in]
      const M = out.get(`${module}.weight`)!;
      const [r, inF] = A.shape as [number, number];
      const outF = B.shape[0]!;
      expect(W.shape).toEqual([outF, inF]);
      for (let o = 0; o < outF; o++) {
        for (let i = 0; i < inF; i++) {
          let delta = 0;
          for (let k = 0; k < r; k++) delta += B.data[o * r + k]! * A.data[k * inF + i]!;
          maxErr = Math.max(maxErr, Math.abs(W.data[o * inF + i]! + scale * delta - M.data[o * inF + i]!));
        }
      }
    }
    expect(maxErr).toBeLessThan(1e-6);
    // Untouched weights (norms, embeddings) are copied exactly.
    expect(out.get("model.norm.weight")!.data).toEqual(base.get("model.norm.weight")!.data);
  });
});
