/** Options and the derived config of `PretrainedModel`. */

export interface PretrainedModelOptions {
  /** Cap on the sequence length (default: max_position_embeddings, or the sliding window if smaller). */
  contextLength?: number;
  /** The original config.json object (unknown keys are written back on export). */
  rawConfig?: Record<string, unknown>;
  /** The directory it was loaded from (tokenizer files are copied from here on export). */
  sourceDir?: string;
  /** Parsed generation_config.json, when the checkpoint has one. */
  generationConfig?: Record<string, unknown> | null;
}

export interface PretrainedModelConfig {
  readonly vocabSize: number;
  readonly contextLength: number;
  readonly dModel: number;
  readonly nLayers: number;
}
