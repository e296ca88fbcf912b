import { type ArchConfig, parseHfConfig, randomCheckpointConfig } from "@agl/trainer-gpu";

/** calc-agent-qwen3's model shape (Qwen3: q/k norms, GQA 2/1, head_dim 32, tied head) at a given vocabulary. */
export function qwen3JobArch(vocabSize: number): ArchConfig {
  return parseHfConfig(
    randomCheckpointConfig({
      family: "qwen3",
      seed: 1,
      vocabSize,
      hiddenSize: 64,
      intermediateSize: 192,
      numLayers: 2,
      numHeads: 2,
      numKvHeads: 1,
      headDim: 32,
      maxPositionEmbeddings: 512,
    }),
  ).arch;
}

/** A deterministic stream of token ids in `[3, vocabSize)` (a linear congruential generator). */
export function tokenStream(vocabSize: number, seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    return 3 + (state % (vocabSize - 3));
  };
}
