import { copyFile, mkdir, readdir, rename, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import * as tf from "@tensorflow/tfjs";
import type { ArchConfig } from "./hf-config.js";
import { SAFETENSORS_FILE, SAFETENSORS_INDEX_FILE } from "./load.js";
import { mergedWeight } from "./lora.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { type FloatTensor, storedBytes, writeSafetensors } from "./safetensors.js";
import { weightSpecs } from "./weights.js";

/**
 * Export a model as a Hugging Face folder that transformers and `vllm serve` load: config.json,
 * generation_config.json, `model.safetensors` (or shards + index) and the tokenizer files of the
 * checkpoint it was loaded from. LoRA adapters are merged into the exported weights (the model itself is
 * not changed).
 */

export type ExportDtype = "float32" | "bfloat16";

export interface ExportPretrainedOptions {
  /** Stored dtype (default float32: trained weights exactly). */
  dtype?: ExportDtype;
  /** Shard when the weights exceed this many bytes (default 5 GB, as transformers does). */
  maxShardBytes?: number;
  /** Copy tokenizer/chat-template files from here (default: the directory the model was loaded from). */
  tokenizerDir?: string;
  /** Merge LoRA adapters into the weights (default true; false exports the base weights). */
  mergeAdapters?: boolean;
}

const ARCHITECTURES: Record<ArchConfig["modelType"], string> = {
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  llama: "LlamaForCausalLM",
  mistral: "MistralForCausalLM",
};

/** Files besides weights and config that make a checkpoint usable (tokenizer, chat template). */
export const TOKENIZER_FILES = [
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "added_tokens.json",
  "vocab.json",
  "merges.txt",
  "tokenizer.model",
  "chat_template.jinja",
  "chat_template.json",
];

/** config.json for the model: the loaded config with its own keys kept, dtype and head written out. */
export function exportConfigJson(model: PretrainedModel, dtype: ExportDtype): Record<string, unknown> {
  const raw: Record<string, unknown> = { ...model.rawConfig };
  delete raw._name_or_path;
  raw.architectures = [ARCHITECTURES[model.arch.modelType]];
  raw.model_type = model.arch.modelType;
  raw.tie_word_embeddings = model.arch.tieWordEmbeddings;
  // transformers 5 writes `dtype`, 4.x `torch_dtype`: keep the style the checkpoint came in.
  if ("dtype" in raw && !("torch_dtype" in raw)) raw.dtype = dtype;
  else raw.torch_dtype = dtype;
  return raw;
}

function generationConfigJson(model: PretrainedModel): Record<string, unknown> {
  if (model.generationConfig) return { ...model.generationConfig };
  const a = model.arch;
  const out: Record<string, unknown> = {};
  if (a.bosTokenId !== null) out.bos_token_id = a.bosTokenId;
  if (a.eosTokenIds.length > 0)
    out.eos_token_id = a.eosTokenIds.length === 1 ? a.eosTokenIds[0] : a.eosTokenIds;
  return out;
}

/** The weights as they will be exported (file layout), adapters merged when asked. */
export function exportTensors(model: PretrainedModel, mergeAdapters = true): Map<string, FloatTensor> {
  const out = new Map<string, FloatTensor>();
  for (const spec of weightSpecs(model.arch)) {
    const path = spec.name.replace(/\.weight$/, "");
    const merge = mergeAdapters && spec.linear && model.lora?.weights.has(path);
    const data = tf.tidy(() => {
      const w = merge ? mergedWeight(model, path) : model.variable(spec.name);
      return (spec.linear ? tf.transpose(w) : w).dataSync() as Float32Array;
    });
    out.set(spec.name, { shape: spec.shape, data: Float32Array.from(data) });
  }
  return out;
}

async function writeJson(file: string, value: unknown): Promise<void> {
  await writeFile(`${file}.tmp`, `${JSON.stringify(value, null, 2)}\n`);
  await rename(`${file}.tmp`, file);
}

/** Copy the tokenizer files that exist in `from` into `to`; returns the names copied. */
export async function copyTokenizerFiles(from: string | undefined, to: string): Promise<string[]> {
  if (!from || resolve(from) === resolve(to)) return [];
  let present: string[];
  try {
    present = await readdir(from);
  } catch {
    return [];
  }
  const copied: string[] = [];
  for (const f of TOKENIZER_FILES) {
    if (!present.includes(f)) continue;
    await copyFile(join(from, f), join(to, f));
    copied.push(f);
  }
  return copied;
}

/** Split tensors into shards of at most `maxBytes` (a tensor larger than that gets a shard of its own). */
function shard(
  tensors: Map<string, FloatTensor>,
  dtype: "F32" | "BF16",
  maxBytes: number,
): Array<Map<string, FloatTensor>> {
  const shards: Array<Map<string, FloatTensor>> = [];
  let current = new Map<string, FloatTensor>();
  let size = 0;
  for (const [name, t] of tensors) {
    const b = storedBytes(t, dtype);
    if (current.size > 0 && size + b > maxBytes) {
      shards.push(current);
      current = new Map();
      size = 0;
    }
    current.set(name, t);
    size += b;
  }
  if (current.size > 0) shards.push(current);
  return shards;
}

/** Write `tensors` as `model.safetensors`, or as `model-0000i-of-0000n.safetensors` + index when sharded. */
export async function writeWeightFiles(
  dir: string,
  tensors: Map<string, FloatTensor>,
  dtype: ExportDtype,
  maxShardBytes: number,
): Promise<string[]> {
  const st = dtype === "bfloat16" ? "BF16" : "F32";
  const shards = shard(tensors, st, maxShardBytes);
  if (shards.length === 1) {
    await writeSafetensors(join(dir, SAFETENSORS_FILE), tensors, { dtype: st });
    return [SAFETENSORS_FILE];
  }
  const pad = (n: number) => String(n).padStart(5, "0");
  const weightMap: Record<string, string> = {};
  const names: string[] = [];
  let total = 0;
  for (const [i, s] of shards.entries()) {
    const name = `model-${pad(i + 1)}-of-${pad(shards.length)}.safetensors`;
    await writeSafetensors(join(dir, name), s, { dtype: st });
    for (const [t, v] of s) {
      weightMap[t] = name;
      total += storedBytes(v, st);
    }
    names.push(name);
  }
  await writeJson(join(dir, SAFETENSORS_INDEX_FILE), {
    metadata: { total_size: total },
    weight_map: weightMap,
  });
  return names;
}

/** Export the model (adapters merged) as a Hugging Face checkpoint folder. Replaces existing weight files. */
export async function exportPretrained(
  model: PretrainedModel,
  dir: string,
  options: ExportPretrainedOptions = {},
): Promise<{ dir: string; files: string[] }> {
  const dtype = options.dtype ?? "float32";
  await mkdir(dir, { recursive: true });
  for (const f of await readdir(dir)) {
    if (f.endsWith(".safetensors") || f === SAFETENSORS_INDEX_FILE) await rm(join(dir, f));
  }
  const tensors = exportTensors(model, options.mergeAdapters ?? true);
  const files = await writeWeightFiles(dir, tensors, dtype, options.maxShardBytes ?? 5_000_000_000);
  await writeJson(join(dir, "config.json"), exportConfigJson(model, dtype));
  await writeJson(join(dir, "generation_config.json"), generationConfigJson(model));
  files.push("config.json", "generation_config.json");
  if (files.some((f) => f.startsWith("model-"))) files.push(SAFETENSORS_INDEX_FILE);
  files.push(...(await copyTokenizerFiles(options.tokenizerDir ?? model.sourceDir, dir)));
  return { dir, files };
}
