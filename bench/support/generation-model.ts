import { applyLora, PretrainedModel, parseHfConfig, randomCheckpointConfig } from "@agl/trainer-gpu";

/**
 * The model of the generation benches (generation-batching.ts, decode-step-profile.ts): bench/pretrained.ts's
 * checkpoint shape, qwen2 d=256, 4 layers, 4/2 heads, vocab 2048, with a LoRA adapter of rank 16.
 */
export function generationBenchModel(): PretrainedModel {
  const { arch } = parseHfConfig(
    randomCheckpointConfig({
      family: "qwen2",
      seed: 1,
      vocabSize: 2048,
      hiddenSize: 256,
      intermediateSize: 768,
      numLayers: 4,
      numHeads: 4,
      numKvHeads: 2,
      maxPositionEmbeddings: 1024,
    }),
  );
  return applyLora(PretrainedModel.random(arch, 1), { rank: 16 });
}
