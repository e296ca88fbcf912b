import { parseOrThrow } from "@agl/core";
import { z } from "zod";

export const ModelConfigSchema = z.strictObject({
  vocabSize: z.number().int().min(2),
  dModel: z.number().int().min(4).default(64),
  nLayers: z.number().int().min(1).default(2),
  nHeads: z.number().int().min(1).default(4),
  contextLength: z.number().int().min(2).default(256),
  /** Hidden width of the MLP as a multiple of dModel. */
  ffMult: z.number().int().min(1).default(4),
  /** Seed of the deterministic initialisation. */
  seed: z.number().int().default(0),
  /**
   * Use the token embedding (transposed) as the output head instead of a separate `head` matrix. With a
   * vocabulary of many rarely seen tokens (e.g. numbers), copying a token from the context is then free
   * for the model to learn: the output row of a token is its own embedding.
   */
  tieEmbeddings: z.boolean().default(false),
});
export type ModelConfig = z.output<typeof ModelConfigSchema>;
export type ModelConfigInput = z.input<typeof ModelConfigSchema>;

export function parseModelConfig(input: ModelConfigInput): ModelConfig {
  const cfg = parseOrThrow(ModelConfigSchema, input, "model config");
  if (cfg.dModel % cfg.nHeads !== 0) {
    throw new Error(
      `Invalid model config: dModel (${cfg.dModel}) must be divisible by nHeads (${cfg.nHeads})`,
    );
  }
  return cfg;
}
