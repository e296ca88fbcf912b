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

/** Architecture keys of published checkpoints' config.json files and their published parameter counts. */
const PUBLISHED: Array<[string, Record<string, unknown>, number]> = [
  [
    "Llama-3.2-1B (transformers 4.x, llama3 rope scaling, explicit head_dim)",
    {
      model_type: "llama",
      vocab_size: 128256,
      hidden_size: 2048,
      intermediate_size: 8192,
      num_hidden_layers: 16,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      head_dim: 64,
      max_position_embeddings: 131072,
      rms_norm_eps: 1e-5,
      rope_theta: 500000.0,
      rope_scaling: {
        factor: 32.0,
        high_freq_factor: 4.0,
        low_freq_factor: 1.0,
        original_max_position_embeddings: 8192,
        rope_type: "llama3",
      },
      tie_word_embeddings: true,
      attention_bias: false,
      mlp_bias: false,
      torch_dtype: "bfloat16",
    },
    1_235_814_400,
  ],
  [
    "Qwen3-0.6B (q/k norms, head_dim 128 != hidden/heads)",
    {
      model_type: "qwen3",
      vocab_size: 151936,
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      max_position_embeddings: 40960,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      rope_scaling: null,
      tie_word_embeddings: true,
      attention_bias: false,
      torch_dtype: "bfloat16",
    },
    596_049_920,
  ],
  [
    "Mistral-7B-v0.1 (untied head, sliding window)",
    {
      model_type: "mistral",
      vocab_size: 32000,
      hidden_size: 4096,
      intermediate_size: 14336,
      num_hidden_layers: 32,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      max_position_embeddings: 32768,
      rms_norm_eps: 1e-5,
      rope_theta: 10000.0,
      sliding_window: 4096,
      tie_word_embeddings: false,
      torch_dtype: "bfloat16",
    },
    7_241_732_096,
  ],
  [
    "a transformers 5.x qwen2 config (rope_parameters, dtype)",
    {
      ...QWEN25_05B,
      rope_theta: undefined,
      torch_dtype: undefined,
      rope_parameters: { rope_type: "default", rope_theta: 1000000.0 },
      dtype: "bfloat16",
    },
    494_032_768,
  ],
];

describe("estimateMemory", () => {
  for (const [name, config, count] of PUBLISHED) {
    it(`counts ${name}: ${count.toLocaleString("en")} parameters`, () => {
      const { arch } = parseHfConfig(JSON.parse(JSON.stringify(config)));
      expect(estimateMemory(arch).parameters).toBe(count);
    });
  }

  it("normalises rope and dtype keys of both transformers generations", () => {
    const llama = parseHfConfig(PUBLISHED[0]![1]).arch;
    expect(llama.rope).toMatchObject({
      type: "llama3",
      theta: 500000,
      factor: 32,
      originalMaxPositionEmbeddings: 8192,
    });
    expect(llama.dtype).toBe("bfloat16");
    const v5 = parseHfConfig(JSON.parse(JSON.stringify(PUBLISHED[3]![1]))).arch;
    expect(v5.rope).toMatchObject({ type: "default", theta: 1000000 });
    expect(v5.dtype).toBe("bfloat16");
    const mistral = parseHfConfig(PUBLISHED[2]![1]).arch;
    expect(mistral.slidingWindow).toBe(4096);
    expect(parseHfConfig(QWEN25_05B).arch.slidingWindow).toBeNull();
  });

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
      batchSize: 1,
      seqLength: 512,
      generationBatch: 8,
      generationContext: 1024,
    });
    // q_proj: 16 x (896 + 896), v_proj: 16 x (896 + 128), per layer.
    expect(lora.trainableParameters).toBe(24 * 16 * (896 + 896 + 896 + 128));
    expect(lora.bytes.optimizer).toBe(2 * 4 * lora.trainableParameters);
    expect(lora.bytes.total).toBeLessThan(full.bytes.total);
  });

  it("defaults to the PPO trainer's own batch shape and says so; a ppo config or explicit numbers override it", () => {
    const { arch } = parseHfConfig(QWEN25_05B);
    const byDefault = estimateMemory(arch, { mode: "lora" });
    // PPO's defaults: micro-batches of 64 rows, 512 + 256 tokens, 16 prompts x 8 samples generated at once.
    expect(byDefault.assumptions).toMatchObject({
      batchSize: 64,
      seqLength: 768,
      generationBatch: 128,
      generationContext: 768,
    });
    expect(byDefault.assumptions.source.batchSize).toBe(
      "PPO default actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    );
    expect(byDefault.summary).toMatch(/micro-batch of 64 rows \(PPO default actor_rollout_ref/);
    expect(byDefault.summary).toMatch(/^at least \d+\.\d GiB: /);
    // The same numbers given explicitly give the same bytes: the defaults are nothing but these numbers.
    const explicit = estimateMemory(arch, {
      mode: "lora",
      batchSize: 64,
      seqLength: 768,
      generationBatch: 128,
      generationContext: 768,
    });
    expect(explicit.bytes).toEqual(byDefault.bytes);
    expect(explicit.assumptions.source.batchSize).toBe("given");
    // Independent arithmetic for the activations: per layer and token 4d + 2(q + 2kv) + q + 3*ffn floats,
    // per layer 2 x B x heads x T^2 attention floats, and for the head's logits and log-softmax at most ten
    // vocabulary chunks of 2^22 floats (it is computed in chunks), when that is less than 2 x B x T x vocab.
    const [B, T, d, q, kv, ffn, L, H, V] = [64, 768, 896, 896, 128, 4864, 24, 14, 151936];
    const head = Math.min(2 * B * T * V, 10 * 4194304);
    const floats = L * (B * T * (4 * d + 2 * (q + 2 * kv) + q + 3 * ffn) + 2 * B * H * T * T) + head;
    expect(byDefault.bytes.activations).toBe(floats * 4);
    // Hundreds of GiB at PPO's default micro-batch: the old default (1 x 512) hid this.
    expect(byDefault.bytes.total / 1024 ** 3).toBeGreaterThan(100);
    // A user's PPO config supplies the shape.
    const small = estimateMemory(arch, {
      mode: "lora",
      ppo: {
        actor_rollout_ref: { actor: { ppo_micro_batch_size_per_gpu: 2 }, rollout: { n: 4 } },
        data: { max_prompt_length: 100, max_response_length: 28, train_batch_size: 2 },
      },
    });
    expect(small.assumptions).toMatchObject({
      batchSize: 2,
      seqLength: 128,
      generationBatch: 8,
      generationContext: 128,
    });
    expect(small.assumptions.source.batchSize).toBe(
      "the PPO config's actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    );
    // Per parameter: full fine-tuning with Adam is 16 bytes (weights, gradients, two moments) at float32.
    const full = estimateMemory(arch, { mode: "full" });
    expect(full.bytes.weights + full.bytes.gradients + full.bytes.optimizer).toBe(16 * 494_032_768);
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
