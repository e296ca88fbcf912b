import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";
import { writeTinyQwenTokenizer } from "./hf-tokenizer-files.js";

/**
 * A complete tiny Hugging Face checkpoint folder: random qwen2/qwen3/llama weights (config.json,
 * model.safetensors, generation_config.json) sized to the tiny Qwen-style tokenizer (tokenizer.json,
 * tokenizer_config.json with the Qwen3 chat template), eos ids consistent across all three configs.
 */
export async function writeTinyPretrainedCheckpoint(
  options: {
    family?: "qwen2" | "qwen3" | "llama";
    seed?: number;
    dir?: string;
    name?: string;
    /** Weight init std (default 0.2: large enough that LoRA on the projections can sharpen the output). */
    initStd?: number;
  } = {},
): Promise<string> {
  const dir = options.dir ?? join(await mkdtemp(join(tmpdir(), "agl-ckpt-")), options.name ?? "tiny-qwen3");
  const tok = await writeTinyQwenTokenizer(dir);
  const [eos, pad] = tok.eosIds as [number, number];
  await writeRandomCheckpoint(dir, {
    family: options.family ?? "qwen3",
    seed: options.seed ?? 0,
    vocabSize: tok.vocabSize,
    hiddenSize: 32,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    maxPositionEmbeddings: 1024,
    initStd: options.initStd ?? 0.2,
    extraConfig: { bos_token_id: pad, eos_token_id: eos },
  });
  const genPath = join(dir, "generation_config.json");
  const gen = JSON.parse(await readFile(genPath, "utf8"));
  await writeFile(genPath, JSON.stringify({ ...gen, bos_token_id: pad, eos_token_id: tok.eosIds }, null, 2));
  return dir;
}

/** The smallest checkpoint shape the engine and multi-policy tests use (one layer, width 16, GQA 2:1). */
export const MICRO_ARCH = {
  hiddenSize: 16,
  numLayers: 1,
  numHeads: 2,
  numKvHeads: 1,
  maxPositionEmbeddings: 64,
  initStd: 0.2,
} as const;
