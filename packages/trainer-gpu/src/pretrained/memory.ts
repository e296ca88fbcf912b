import { z } from "zod";
import { type PPOConfigInput, parsePPOConfig } from "../ppo/config.js";
import { DEFAULT_HEAD_CHUNK_ELEMENTS } from "./chunked-head.js";
import type { ArchConfig } from "./hf-config.js";
import { LINEAR_MODULES, linearSites, weightSpecs } from "./weights.js";

/**
 * Memory estimate for training or serving a model, in bytes: weights, gradients, Adam moments, the KV
 * cache of a generation batch and the activations a training step keeps for the backward pass. The
 * activation term counts the tensors this implementation keeps per layer (a floor: the backend adds
 * workspace on top), so treat the total as "at least".
 *
 * The batch shape defaults to what the PPO trainer itself runs (its defaults, or the `ppo` config
 * given): micro-batches of `ppo_micro_batch_size_per_gpu` rows of `max_prompt_length +
 * max_response_length` tokens, and `train_batch_size x rollout.n` generations at once. The result says
 * which numbers it assumed and where each came from (`assumptions`, `summary`).
 */

export const MemoryEstimateOptionsSchema = z.strictObject({
  mode: z.enum(["full", "lora"]).default("full"),
  loraRank: z.number().int().min(1).default(8),
  loraTargetModules: z.array(z.enum(LINEAR_MODULES)).default([...LINEAR_MODULES]),
  /** Sequences per training micro-batch. Default: the PPO config's `ppo_micro_batch_size_per_gpu` (64). */
  batchSize: z.number().int().min(1).optional(),
  /** Tokens per training sequence. Default: `max_prompt_length + max_response_length` (512 + 256). */
  seqLength: z.number().int().min(1).optional(),
  /** Concurrent generations, for the KV cache. Default: `train_batch_size x rollout.n` (16 x 8). */
  generationBatch: z.number().int().min(0).optional(),
  /** Context of each generation. Default: `max_prompt_length + max_response_length`. */
  generationContext: z.number().int().min(1).optional(),
  /** The PPO config (VERL shape) whose batch settings fill the defaults above; default PPO's own. */
  ppo: z.unknown().optional(),
  /** Bytes per stored number (float32 on tfjs backends). */
  bytesPerValue: z.number().int().min(1).default(4),
});
export type MemoryEstimateOptions = Omit<z.input<typeof MemoryEstimateOptionsSchema>, "ppo"> & {
  ppo?: PPOConfigInput;
};

/** The batch shape an estimate assumed; `source` says where each number came from. */
export interface MemoryAssumptions {
  batchSize: number;
  seqLength: number;
  generationBatch: number;
  generationContext: number;
  source: Record<"batchSize" | "seqLength" | "generationBatch" | "generationContext", string>;
}

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
  assumptions: MemoryAssumptions;
  /** One paragraph for people: the total, its parts, and the batch shape assumed (with its source). */
  summary: string;
}

function assumptionsOf(o: z.output<typeof MemoryEstimateOptionsSchema>): MemoryAssumptions {
  const config = parsePPOConfig(o.ppo ?? {});
  const which = o.ppo === undefined ? "PPO default" : "the PPO config's";
  const context = config.data.max_prompt_length + config.data.max_response_length;
  const pick = (given: number | undefined, fallback: number, from: string): [number, string] =>
    given === undefined ? [fallback, `${which} ${from}`] : [given, "given"];
  const [batchSize, batchSource] = pick(
    o.batchSize,
    config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
  );
  const [seqLength, seqSource] = pick(
    o.seqLength,
    context,
    "data.max_prompt_length + data.max_response_length",
  );
  const [generationBatch, genSource] = pick(
    o.generationBatch,
    config.data.train_batch_size * config.actor_rollout_ref.rollout.n,
    "data.train_batch_size x actor_rollout_ref.rollout.n",
  );
  const [generationContext, ctxSource] = pick(
    o.generationContext,
    context,
    "data.max_prompt_length + data.max_response_length",
  );
  return {
    batchSize,
    seqLength,
    generationBatch,
    generationContext,
    source: {
      batchSize: batchSource,
      seqLength: seqSource,
      generationBatch: genSource,
      generationContext: ctxSource,
    },
  };
}

const GIB = 1024 ** 3;
const gib = (bytes: number) => `${(bytes / GIB).toFixed(bytes < GIB ? 3 : 1)} GiB`;

export function estimateMemory(arch: ArchConfig, options: MemoryEstimateOptions = {}): MemoryEstimate {
  const o = MemoryEstimateOptionsSchema.parse(options);
  const assumed = assumptionsOf(o);
  const { batchSize, seqLength, generationBatch, generationContext } = assumed;
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
    2 * arch.numLayers * arch.numKvHeads * arch.headDim * generationBatch * generationContext * b;
  const N = batchSize * seqLength;
  const d = arch.hiddenSize;
  const q = arch.numHeads * arch.headDim;
  const kv = arch.numKvHeads * arch.headDim;
  // Per layer and token: norms, q/k/v (+ rotated copies), attention output, MLP gate/up/act, residuals;
  // plus the per-head T x T scores and probabilities. At the end the head's logits and log-softmax, which
  // training computes in vocabulary chunks (chunked-head.ts): a few chunks' temporaries at most.
  const perTokenLayer = 4 * d + 2 * (q + 2 * kv) + q + 3 * arch.intermediateSize;
  const scores = 2 * batchSize * arch.numHeads * seqLength * seqLength;
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
  const src = assumed.source;
  const summary =
    `at least ${gib(bytes.total)}: weights ${gib(bytes.weights)}, ` +
    `${o.mode === "lora" ? `LoRA adapters ${gib(bytes.adapters)}, ` : ""}` +
    `gradients ${gib(bytes.gradients)}, Adam ${gib(bytes.optimizer)} ` +
    `(${trainable.toLocaleString("en")} trainable of ${parameters.toLocaleString("en")} parameters), ` +
    `activations ${gib(bytes.activations)} for a micro-batch of ${batchSize} rows (${src.batchSize}) ` +
    `x ${seqLength} tokens (${src.seqLength}), ` +
    `KV cache ${gib(bytes.kvCache)} for ${generationBatch} generations (${src.generationBatch}) ` +
    `x ${generationContext} tokens (${src.generationContext}). ` +
    "Pass batchSize / seqLength / generationBatch / generationContext (or your ppo config) for other shapes.";
  return { parameters, trainableParameters: trainable, bytes, assumptions: assumed, summary };
}
