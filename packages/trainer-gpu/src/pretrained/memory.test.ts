import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { parseHfConfig } from "./hf-config.js";
import { loadPretrained } from "./load.js";
import { applyLora } from "./lora.js";
import { estimateMemory } from "./memory.js";
import { writeRandomCheckpoint } from "./random-checkpoint.js";

/** Qwen2.5-0.5B-Instruct's published config.json (the architecture keys). */
const QWEN25_05B = {
  architectures: ["Qwen2ForCausalLM"],
  model_type: "qwen2",
  vocab_size: 151936,
  hidden_size: 896,
  intermediate_size: 4864,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  max_position_embeddings: 32768,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  rope_scaling: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  hidden_act: "silu",
  use_sliding_window: false,
  sliding_window: 32768,
  max_window_layers: 21,
  bos_token_id: 151643,
  eos_token_id: 151645,
};

describe("estimateMemory", () => {
  it("counts Qwen2.5-0.5B's published 494,032,768 parameters and the LoRA adapter size", () => {
    const { arch } = parseHfConfig(QWEN25_05B);
    const full = estimateMemory(arch, {
      mode: "full",
      batchSize: 1,
      seqLength: 512,
      generationBatch: 8,
      generationContext: 1024,
    });
    expect(full.parameters).toBe(494_032_768);
    expect(full.bytes.weights).toBe(494_032_768 * 4);
    expect(full.bytes.optimizer).toBe(2 * full.bytes.weights);
    // KV cache: 2 (k, v) x 24 layers x 2 kv heads x 64 dims x 8 x 1024 positions x 4 bytes.
    expect(full.bytes.kvCache).toBe(2 * 24 * 2 * 64 * 8 * 1024 * 4);
    const lora = estimateMemory(arch, {
      mode: "lora",
      loraRank: 16,
      loraTargetModules: ["q_proj", "v_proj"],
    });
    // q_proj: 16 x (896 + 896), v_proj: 16 x (896 + 128), per layer.
    expect(lora.trainableParameters).toBe(24 * 16 * (896 + 896 + 896 + 128));
    expect(lora.bytes.optimizer).toBe(2 * 4 * lora.trainableParameters);
    expect(lora.bytes.total).toBeLessThan(full.bytes.total);
  });

  it("agrees with the parameter counts of a loaded model, full and with LoRA", async () => {
    await selectBackend({ log: () => {} });
    const root = await mkdtemp(join(tmpdir(), "agl-hf-mem-"));
    try {
      for (const family of ["qwen3", "llama"] as const) {
        const dir = join(root, family);
        const { arch } = await writeRandomCheckpoint(dir, { family });
        const { model } = await loadPretrained(dir);
        expect(estimateMemory(arch).parameters).toBe(model.parameterCount);
        const before = model.parameterCount;
        applyLora(model, { rank: 4, targetModules: ["o_proj", "down_proj"] });
        const est = estimateMemory(arch, {
          mode: "lora",
          loraRank: 4,
          loraTargetModules: ["o_proj", "down_proj"],
        });
        expect(est.trainableParameters).toBe(model.trainableVariables.reduce((n, v) => n + v.size, 0));
        expect(model.parameterCount - before).toBe(est.trainableParameters);
        model.dispose();
      }
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
