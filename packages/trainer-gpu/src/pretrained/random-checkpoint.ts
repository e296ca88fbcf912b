import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type ExportDtype, exportPretrained } from "./export.js";
import { type ArchConfig, type ModelType, parseHfConfig } from "./hf-config.js";
import { PretrainedModel } from "./pretrained-model.js";

/**
 * Tiny randomly initialised checkpoints in the exact Hugging Face layout, for tests, `gpu:check` and
 * experiments without hub access. Each family gets a config that exercises its peculiarities: qwen2 with
 * q/k/v biases and tied embeddings, qwen3 with q/k norms and an explicit head_dim different from
 * hidden/heads, llama with llama3 rope scaling and untied embeddings, mistral with a sliding window
 * larger than the context.
 */

export interface RandomCheckpointOptions {
  family: ModelType;
  seed?: number;
  vocabSize?: number;
  hiddenSize?: number;
  intermediateSize?: number;
  numLayers?: number;
  numHeads?: number;
  numKvHeads?: number;
  headDim?: number;
  maxPositionEmbeddings?: number;
  tieWordEmbeddings?: boolean;
  /** `v4`: rope_theta / rope_scaling / torch_dtype; `v5`: rope_parameters / dtype (default v4). */
  configStyle?: "v4" | "v5";
  /** Stored dtype (default float32). */
  dtype?: ExportDtype;
  /** Shard the weights into files of at most this many bytes. */
  maxShardBytes?: number;
  /** Standard deviation of the random matrices (default 0.02, as transformers initialises). */
  initStd?: number;
  /** Extra config.json keys (override the generated ones). */
  extraConfig?: Record<string, unknown>;
}

/** The config.json object of a tiny random checkpoint. */
export function randomCheckpointConfig(o: RandomCheckpointOptions): Record<string, unknown> {
  const f = o.family;
  const hidden = o.hiddenSize ?? 32;
  const heads = o.numHeads ?? 4;
  const theta = f === "llama" ? 500000 : f === "mistral" ? 10000 : 1000000;
  const scaling =
    f === "llama"
      ? {
          rope_type: "llama3",
          factor: 8,
          low_freq_factor: 1,
          high_freq_factor: 4,
          original_max_position_embeddings: 64,
        }
      : null;
  const style = o.configStyle ?? "v4";
  const dtype = o.dtype ?? "float32";
  const cfg: Record<string, unknown> = {
    architectures: [
      {
        qwen2: "Qwen2ForCausalLM",
        qwen3: "Qwen3ForCausalLM",
        llama: "LlamaForCausalLM",
        mistral: "MistralForCausalLM",
      }[f],
    ],
    model_type: f,
    vocab_size: o.vocabSize ?? 256,
    hidden_size: hidden,
    intermediate_size: o.intermediateSize ?? 64,
    num_hidden_layers: o.numLayers ?? 2,
    num_attention_heads: heads,
    num_key_value_heads: o.numKvHeads ?? 2,
    max_position_embeddings: o.maxPositionEmbeddings ?? 512,
    rms_norm_eps: 1e-6,
    hidden_act: "silu",
    initializer_range: 0.02,
    attention_dropout: 0,
    use_cache: true,
    tie_word_embeddings: o.tieWordEmbeddings ?? (f === "qwen2" || f === "qwen3"),
    bos_token_id: 1,
    eos_token_id: 2,
  };
  if (o.headDim !== undefined || f === "qwen3") cfg.head_dim = o.headDim ?? (2 * hidden) / heads;
  if (f === "qwen3" || f === "llama") cfg.attention_bias = false;
  if (f === "llama") cfg.mlp_bias = false;
  if (f === "qwen2" || f === "qwen3") {
    cfg.use_sliding_window = false;
    cfg.sliding_window = null;
    cfg.max_window_layers = o.numLayers ?? 2;
  }
  if (f === "mistral") cfg.sliding_window = 4096;
  if (style === "v4") {
    cfg.rope_theta = theta;
    cfg.rope_scaling = scaling;
    cfg.torch_dtype = dtype;
    cfg.transformers_version = "4.57.1";
  } else {
    cfg.rope_parameters = { rope_type: "default", rope_theta: theta, ...(scaling ?? {}) };
    cfg.dtype = dtype;
    cfg.transformers_version = "5.0.0";
  }
  return { ...cfg, ...o.extraConfig };
}

/** Write a tiny random checkpoint to `dir`; returns its normalised architecture. */
export async function writeRandomCheckpoint(
  dir: string,
  options: RandomCheckpointOptions,
): Promise<{ dir: string; arch: ArchConfig }> {
  const raw = randomCheckpointConfig(options);
  const { arch } = parseHfConfig(raw, join(dir, "config.json"));
  const model = PretrainedModel.random(arch, options.seed ?? 0, {
    std: options.initStd,
    rawConfig: raw,
    generationConfig: { bos_token_id: 1, eos_token_id: 2, do_sample: true, temperature: 0.7, top_p: 0.8 },
  });
  try {
    await mkdir(dir, { recursive: true });
    await exportPretrained(model, dir, {
      dtype: options.dtype ?? "float32",
      maxShardBytes: options.maxShardBytes,
    });
    // exportPretrained writes the config in the checkpoint's own style; keep the generated one verbatim.
    await writeFile(join(dir, "config.json"), `${JSON.stringify(raw, null, 2)}\n`);
  } finally {
    model.dispose();
  }
  return { dir, arch };
}
