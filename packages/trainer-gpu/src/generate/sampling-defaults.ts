import type { CausalLM } from "../model/causal-lm.js";

/** Sampling parameters used when a request leaves them out (a request's own values always win). */
export interface SamplingDefaults {
  temperature?: number;
  topP?: number;
  topK?: number;
  /** A ceiling: a request's `maxTokens` above it is lowered to it (as vLLM treats a default max_tokens). */
  maxTokens?: number;
}

/**
 * A checkpoint's `generation_config.json` as sampling defaults, as vLLM's `--generation-config auto` reads it
 * (`temperature`, `top_p`, `top_k`, and `max_new_tokens` as the max_tokens ceiling), plus transformers'
 * `do_sample: false` = greedy (vLLM ignores `do_sample`; a checkpoint that says so expects greedy decoding).
 */
export function generationConfigDefaults(
  config: Record<string, unknown> | null | undefined,
): SamplingDefaults {
  if (!config) return {};
  const num = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
  const out: SamplingDefaults = {};
  if (config.do_sample === false) out.temperature = 0;
  else if (num(config.temperature) && config.temperature >= 0) out.temperature = config.temperature;
  if (num(config.top_p) && config.top_p > 0 && config.top_p <= 1) out.topP = config.top_p;
  if (num(config.top_k) && Number.isInteger(config.top_k) && config.top_k > 0) out.topK = config.top_k;
  if (num(config.max_new_tokens) && config.max_new_tokens >= 1)
    out.maxTokens = Math.floor(config.max_new_tokens);
  return out;
}

/** The defaults of a model loaded from a checkpoint (its `generation_config.json`); none for other models. */
export function modelSamplingDefaults(model: CausalLM): SamplingDefaults {
  // Only a PretrainedModel carries one; reading it structurally keeps generate/ free of pretrained/.
  return generationConfigDefaults(
    (model as { generationConfig?: Record<string, unknown> | null }).generationConfig,
  );
}
