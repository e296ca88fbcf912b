import { z } from "zod";
import { DEFAULT_HEAD_CHUNK_ELEMENTS } from "./chunked-head.js";
import type { ArchConfig } from "./hf-config.js";
import { LINEAR_MODULES, linearSites, weightSpecs } from "./weights.js";

/**
 * Memory estimate for training or serving a model, in bytes: weights, gradients, Adam moments, the KV
 * cache of a generation batch and the activations a training step keeps for the backward pass. The
 * activation term counts the tensors this implementation keeps per layer (a floor: the backend adds
 * workspace on top), so treat the total as "at least".
 */

export const MemoryEstimateOptionsSchema = z.strictObject({
  mode: z.enum(["full", "lora"]).default("full"),
  loraRank: z.number().int().min(1).default(8),
  loraTargetModules: z.array(z.enum(LINEAR_MODULES)).default([...LINEAR_MODULES]),
  /** Sequences per training micro-batch. */
  batchSize: z.number().int().min(1).default(1),
  /** Tokens per training sequence. */
  seqLength: z.number().int().min(1).default(512),
  /** Concurrent generations and their context, for the KV cache. */
  generationBatch: z.number().int().min(0).default(1),
  generationContext: z.number().int().min(1).default(2048),
  /** Bytes per stored number (float32 on tfjs backends). */
  bytesPerValue: z.number().int().min(1).default(4),
});
export type MemoryEstimateOptions = z.input<typeof MemoryEstimateOptionsSchema>;

export interface MemoryEstimate {
  parameters: number;
  trainableParameters: number;
  bytes: {
    weights: number;
    adapters: number;
    gradients: number;
    optimizer: number;
    kvCache: number;
    activations: number;
    total: number;
  };
}

export function estimateMemory(arch: ArchConfig, options: MemoryEstimateOptions = {}): MemoryEstimate {
  const o = MemoryEstimateOptionsSchema.parse(options);
  const b = o.bytesPerValue;
  const parameters = weightSpecs(arch).reduce((n, s) => n + s.shape.reduce((x, y) => x * y, 1), 0);
  const targets = new Set(o.loraTargetModules);
  const adapterParams =
    o.mode === "lora"
      ? linearSites(arch)
          .filter((s) => targets.has(s.module))
          .reduce((n, s) => n + o.loraRank * (s.inFeatures + s.outFeatures), 0)
      : 0;
  const trainable = o.mode === "lora" ? adapterParams : parameters;
  const kvCache =
    2 * arch.numLayers * arch.numKvHeads * arch.headDim * o.generationBatch * o.generationContext * b;
  const N = o.batchSize * o.seqLength;
  const d = arch.hiddenSize;
  const q = arch.numHeads * arch.headDim;
  const kv = arch.numKvHeads * arch.headDim;
  // Per layer and token: norms, q/k/v (+ rotated copies), attention output, MLP gate/up/act, residuals;
  // plus the per-head T x T scores and probabilities. At the end the head's logits and log-softmax, which
  // training computes in vocabulary chunks (chunked-head.ts): a few chunks' temporaries at most.
  const perTokenLayer = 4 * d + 2 * (q + 2 * kv) + q + 3 * arch.intermediateSize;
  const scores = 2 * o.batchSize * arch.numHeads * o.seqLength * o.seqLength;
  const head = Math.min(2 * N * arch.vocabSize, 10 * DEFAULT_HEAD_CHUNK_ELEMENTS);
  const activations = (arch.numLayers * (N * perTokenLayer + scores) + head) * b;
  const bytes = {
    weights: parameters * b,
    adapters: adapterParams * b,
    gradients: trainable * b,
    optimizer: 2 * trainable * b,
    kvCache,
    activations,
    total: 0,
  };
  bytes.total =
    bytes.weights + bytes.adapters + bytes.gradients + bytes.optimizer + bytes.kvCache + bytes.activations;
  return { parameters, trainableParameters: trainable, bytes };
}
