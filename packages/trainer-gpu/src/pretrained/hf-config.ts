import { z } from "zod";
import { PretrainedCheckpointError } from "./errors.js";

/**
 * `config.json` of a Hugging Face causal LM, as transformers 4.x writes it (`rope_theta`, `rope_scaling`,
 * `torch_dtype`) and as 5.x writes it (`rope_parameters`, `dtype`), normalised to one `ArchConfig`.
 * Unknown keys are kept (real configs carry many) and written back on export.
 */

export const SUPPORTED_MODEL_TYPES = ["qwen2", "qwen3", "llama", "mistral"] as const;
export type ModelType = (typeof SUPPORTED_MODEL_TYPES)[number];

export type RopeType = "default" | "linear" | "llama3";

export interface RopeConfig {
  type: RopeType;
  theta: number;
  /** `linear` and `llama3` */
  factor: number;
  /** `llama3` */
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositionEmbeddings: number;
  /** Fraction of each head's dimensions that rotate (1 for the supported families' checkpoints). */
  partialRotaryFactor: number;
}

/** The architecture, normalised (camelCase), that the model and the exporters work from. */
export interface ArchConfig {
  modelType: ModelType;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  maxPositionEmbeddings: number;
  rmsNormEps: number;
  rope: RopeConfig;
  tieWordEmbeddings: boolean;
  /** Bias on q/k/v projections (always on for qwen2). */
  qkvBias: boolean;
  /** Bias on o_proj (llama/qwen3 `attention_bias`; never for qwen2). */
  oBias: boolean;
  /** Bias on gate/up/down (llama `mlp_bias`). */
  mlpBias: boolean;
  /** Per-head RMSNorm on queries and keys before RoPE (qwen3). */
  qkNorm: boolean;
  /** Sliding-window attention size when the checkpoint enables it (the context is capped to it). */
  slidingWindow: number | null;
  /** Stored dtype named by the config (`torch_dtype` / `dtype`), e.g. "bfloat16". */
  dtype: string | null;
  bosTokenId: number | null;
  eosTokenIds: number[];
  padTokenId: number | null;
}

const tokenIds = z.union([z.number().int(), z.array(z.number().int())]).nullish();

const RopeDictSchema = z.looseObject({
  rope_type: z.string().optional(),
  type: z.string().optional(),
  rope_theta: z.number().positive().optional(),
  factor: z.number().positive().optional(),
  low_freq_factor: z.number().positive().optional(),
  high_freq_factor: z.number().positive().optional(),
  original_max_position_embeddings: z.number().int().positive().optional(),
  partial_rotary_factor: z.number().positive().max(1).optional(),
});

export const HfConfigSchema = z.looseObject({
  model_type: z.string(),
  vocab_size: z.number().int().positive(),
  hidden_size: z.number().int().positive(),
  intermediate_size: z.number().int().positive(),
  num_hidden_layers: z.number().int().positive(),
  num_attention_heads: z.number().int().positive(),
  num_key_value_heads: z.number().int().positive().nullish(),
  head_dim: z.number().int().positive().nullish(),
  max_position_embeddings: z.number().int().positive().default(2048),
  rms_norm_eps: z.number().positive().default(1e-6),
  hidden_act: z.string().default("silu"),
  rope_theta: z.number().positive().nullish(),
  rope_scaling: RopeDictSchema.nullish(),
  rope_parameters: z.record(z.string(), z.unknown()).nullish(),
  partial_rotary_factor: z.number().positive().max(1).nullish(),
  tie_word_embeddings: z.boolean().optional(),
  attention_bias: z.boolean().optional(),
  mlp_bias: z.boolean().optional(),
  sliding_window: z.number().int().positive().nullish(),
  use_sliding_window: z.boolean().optional(),
  torch_dtype: z.string().nullish(),
  dtype: z.string().nullish(),
  bos_token_id: tokenIds,
  eos_token_id: tokenIds,
  pad_token_id: tokenIds,
});
export type HfConfig = z.output<typeof HfConfigSchema>;

function firstId(v: number | number[] | null | undefined): number | null {
  if (v == null) return null;
  return Array.isArray(v) ? (v[0] ?? null) : v;
}

function rope(c: HfConfig, file: string): RopeConfig {
  // 5.x: rope_parameters (flat, or per attention type for models with layer_types); 4.x: rope_theta + rope_scaling.
  let params: Record<string, unknown> = {};
  if (c.rope_parameters) {
    const nested = c.rope_parameters.full_attention;
    params = (typeof nested === "object" && nested !== null ? nested : c.rope_parameters) as Record<
      string,
      unknown
    >;
  } else if (c.rope_scaling) params = c.rope_scaling;
  const p = RopeDictSchema.safeParse(params);
  if (!p.success)
    throw new PretrainedCheckpointError("invalid_config", file, `rope parameters: ${p.error.message}`);
  const type = p.data.rope_type ?? p.data.type ?? "default";
  if (type !== "default" && type !== "linear" && type !== "llama3") {
    throw new PretrainedCheckpointError(
      "unsupported_config",
      file,
      `rope type "${type}" is not supported (supported: default, linear, llama3)`,
    );
  }
  const theta = p.data.rope_theta ?? c.rope_theta ?? 10000;
  const factor = p.data.factor ?? 1;
  if (type === "llama3" && (p.data.low_freq_factor === undefined || p.data.high_freq_factor === undefined)) {
    throw new PretrainedCheckpointError(
      "invalid_config",
      file,
      "rope type llama3 needs low_freq_factor and high_freq_factor",
    );
  }
  return {
    type,
    theta,
    factor,
    lowFreqFactor: p.data.low_freq_factor ?? 1,
    highFreqFactor: p.data.high_freq_factor ?? 4,
    originalMaxPositionEmbeddings: p.data.original_max_position_embeddings ?? c.max_position_embeddings,
    partialRotaryFactor: p.data.partial_rotary_factor ?? c.partial_rotary_factor ?? 1,
  };
}

/** Parse and normalise a config.json object; `file` names it in errors. */
export function parseHfConfig(json: unknown, file = "config.json"): { arch: ArchConfig; raw: HfConfig } {
  const typeProbe = z.object({ model_type: z.string() }).safeParse(json);
  if (!typeProbe.success)
    throw new PretrainedCheckpointError("invalid_config", file, "model_type is missing");
  const modelType = typeProbe.data.model_type;
  if (!(SUPPORTED_MODEL_TYPES as readonly string[]).includes(modelType)) {
    throw new PretrainedCheckpointError(
      "unknown_model_type",
      file,
      `model_type "${modelType}" is not supported (supported: ${SUPPORTED_MODEL_TYPES.join(", ")})`,
    );
  }
  const parsed = HfConfigSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new PretrainedCheckpointError(
      "invalid_config",
      file,
      `${issue?.path.join(".") || "config"}: ${issue?.message ?? "invalid"}`,
    );
  }
  const c = parsed.data;
  if (c.hidden_act !== "silu") {
    throw new PretrainedCheckpointError(
      "unsupported_config",
      file,
      `hidden_act "${c.hidden_act}" is not supported (silu)`,
    );
  }
  const numHeads = c.num_attention_heads;
  const numKvHeads = c.num_key_value_heads ?? numHeads;
  if (numHeads % numKvHeads !== 0) {
    throw new PretrainedCheckpointError(
      "invalid_config",
      file,
      `num_attention_heads (${numHeads}) must be a multiple of num_key_value_heads (${numKvHeads})`,
    );
  }
  const headDim = c.head_dim ?? c.hidden_size / numHeads;
  if (!Number.isInteger(headDim)) {
    throw new PretrainedCheckpointError(
      "invalid_config",
      file,
      "hidden_size is not divisible by num_attention_heads and head_dim is not set",
    );
  }
  const r = rope(c, file);
  if (Math.floor(headDim * r.partialRotaryFactor) % 2 !== 0) {
    throw new PretrainedCheckpointError("invalid_config", file, "the rotary dimension must be even");
  }
  const type = modelType as ModelType;
  const slidingOn =
    type === "mistral" ? c.sliding_window != null : c.use_sliding_window === true && c.sliding_window != null;
  const eos = c.eos_token_id == null ? [] : Array.isArray(c.eos_token_id) ? c.eos_token_id : [c.eos_token_id];
  const arch: ArchConfig = {
    modelType: type,
    vocabSize: c.vocab_size,
    hiddenSize: c.hidden_size,
    intermediateSize: c.intermediate_size,
    numLayers: c.num_hidden_layers,
    numHeads,
    numKvHeads,
    headDim,
    maxPositionEmbeddings: c.max_position_embeddings,
    rmsNormEps: c.rms_norm_eps,
    rope: r,
    tieWordEmbeddings: c.tie_word_embeddings ?? false,
    qkvBias: type === "qwen2" ? true : (c.attention_bias ?? false),
    oBias: type === "qwen2" ? false : (c.attention_bias ?? false),
    mlpBias: type === "llama" ? (c.mlp_bias ?? false) : false,
    qkNorm: type === "qwen3",
    slidingWindow: slidingOn ? (c.sliding_window ?? null) : null,
    dtype: c.dtype ?? c.torch_dtype ?? null,
    bosTokenId: firstId(c.bos_token_id),
    eosTokenIds: eos,
    padTokenId: firstId(c.pad_token_id),
  };
  return { arch, raw: c };
}
