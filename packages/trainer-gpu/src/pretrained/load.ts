import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { PretrainedCheckpointError } from "./errors.js";
import { type ArchConfig, type HfConfig, parseHfConfig } from "./hf-config.js";
import { PretrainedModel } from "./pretrained-model.js";
import {
  type FloatTensor,
  readSafetensors,
  readSafetensorsHeader,
  type SafetensorsEntry,
} from "./safetensors.js";
import { weightSpecs } from "./weights.js";

/**
 * Load a Hugging Face checkpoint directory: config.json (transformers 4.x or 5.x), `model.safetensors`
 * or sharded `model-0000x-of-0000y.safetensors` + `model.safetensors.index.json`, and
 * generation_config.json. Every tensor is checked (present, shape, float dtype) before any is read, and
 * every problem is a `PretrainedCheckpointError` naming the file and tensor.
 */

export const SAFETENSORS_FILE = "model.safetensors";
export const SAFETENSORS_INDEX_FILE = "model.safetensors.index.json";

export interface LoadPretrainedOptions {
  /** Cap the context length (default: the config's max_position_embeddings). */
  contextLength?: number;
}

export interface LoadedPretrained {
  model: PretrainedModel;
  /** Normalised architecture. */
  arch: ArchConfig;
  /** config.json as parsed (unknown keys kept). */
  config: HfConfig;
  /** generation_config.json, or null when absent. */
  generationConfig: GenerationConfig | null;
  /** The name a server should report (the directory's base name unless `_name_or_path` says otherwise). */
  modelName: string;
  dir: string;
}

export const GenerationConfigSchema = z.looseObject({
  bos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
  eos_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
  pad_token_id: z.union([z.number().int(), z.array(z.number().int())]).nullish(),
  do_sample: z.boolean().optional(),
  temperature: z.number().optional(),
  top_p: z.number().optional(),
  top_k: z.number().int().optional(),
  repetition_penalty: z.number().optional(),
  max_new_tokens: z.number().int().optional(),
});
export type GenerationConfig = z.output<typeof GenerationConfigSchema>;

/** Parse a JSON file; a missing file is `null` when `optional`, else a typed error. */
export async function readJsonFile(file: string, optional = false): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      if (optional) return null;
      throw new PretrainedCheckpointError("missing_file", file, "file not found");
    }
    throw error;
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new PretrainedCheckpointError("invalid_json", file, `not valid JSON (${(error as Error).message})`);
  }
}

/** Which file holds each tensor: the index's weight_map, or the single model.safetensors. */
async function tensorFiles(
  dir: string,
): Promise<{ files: string[]; owner: (name: string) => string | undefined; listing: string }> {
  const indexPath = join(dir, SAFETENSORS_INDEX_FILE);
  const index = await readJsonFile(indexPath, true);
  if (index !== null) {
    const parsed = z.object({ weight_map: z.record(z.string(), z.string()) }).safeParse(index);
    if (!parsed.success)
      throw new PretrainedCheckpointError("invalid_json", indexPath, "weight_map is missing or malformed");
    const map = parsed.data.weight_map;
    return { files: [...new Set(Object.values(map))], owner: (n) => map[n], listing: indexPath };
  }
  const single = join(dir, SAFETENSORS_FILE);
  return { files: [SAFETENSORS_FILE], owner: () => SAFETENSORS_FILE, listing: single };
}

/** Tensors a checkpoint may carry that the model does not use. */
function ignorable(name: string, arch: ArchConfig): boolean {
  return name.endsWith("rotary_emb.inv_freq") || (arch.tieWordEmbeddings && name === "lm_head.weight");
}

export async function loadPretrained(
  dir: string,
  options: LoadPretrainedOptions = {},
): Promise<LoadedPretrained> {
  const configPath = join(dir, "config.json");
  const { arch, raw } = parseHfConfig(await readJsonFile(configPath), configPath);
  const genPath = join(dir, "generation_config.json");
  const genRaw = await readJsonFile(genPath, true);
  let generationConfig: GenerationConfig | null = null;
  if (genRaw !== null) {
    const g = GenerationConfigSchema.safeParse(genRaw);
    if (!g.success)
      throw new PretrainedCheckpointError("invalid_config", genPath, g.error.issues[0]?.message ?? "invalid");
    generationConfig = g.data;
  }

  const { files, owner, listing } = await tensorFiles(dir);
  const headers = new Map<string, Map<string, SafetensorsEntry>>();
  for (const f of files) headers.set(f, (await readSafetensorsHeader(join(dir, f))).entries);
  const specs = weightSpecs(arch);
  const expected = new Set(specs.map((s) => s.name));
  for (const spec of specs) {
    const file = owner(spec.name);
    const entry = file ? headers.get(file)?.get(spec.name) : undefined;
    if (!file || !entry) {
      throw new PretrainedCheckpointError(
        "missing_tensor",
        file ? join(dir, file) : listing,
        `tensor required by the ${arch.modelType} config is missing`,
        spec.name,
      );
    }
    if (entry.shape.join(",") !== spec.shape.join(",")) {
      throw new PretrainedCheckpointError(
        "shape_mismatch",
        join(dir, file),
        `shape [${entry.shape}] but config.json implies [${spec.shape}]`,
        spec.name,
      );
    }
  }
  for (const [f, entries] of headers) {
    for (const name of entries.keys()) {
      if (!expected.has(name) && !ignorable(name, arch)) {
        throw new PretrainedCheckpointError(
          "unexpected_tensor",
          join(dir, f),
          `tensor is not part of a ${arch.modelType} model with this config (does config.json match the weights?)`,
          name,
        );
      }
    }
  }
  const tensors = new Map<string, FloatTensor>();
  for (const f of files) {
    const names = specs.map((s) => s.name).filter((n) => owner(n) === f);
    for (const [n, t] of await readSafetensors(join(dir, f), names)) tensors.set(n, t);
  }
  // Each host copy is dropped as soon as its variable exists, so peak memory stays near one model.
  const take = (name: string) => {
    const t = tensors.get(name) as FloatTensor;
    tensors.delete(name);
    return t;
  };
  const model = PretrainedModel.fromTensors(arch, take, {
    contextLength: options.contextLength,
    rawConfig: raw,
    sourceDir: dir,
    generationConfig,
  });
  const nameOrPath =
    typeof raw._name_or_path === "string" && raw._name_or_path !== "" ? raw._name_or_path : undefined;
  const modelName = nameOrPath ?? dir.replace(/\/+$/, "").split("/").pop() ?? dir;
  return { model, arch, config: raw, generationConfig, modelName, dir };
}
