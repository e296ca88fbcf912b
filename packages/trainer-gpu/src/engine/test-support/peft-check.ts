/**
 * The checks vLLM makes (and fails on) when it loads a LoRA adapter folder, written out independently of
 * this package's PEFT writer: adapter_config.json with `peft_type: LORA`, a rank within the server's
 * `--max-lora-rank`, target modules it supports, and an adapter_model.safetensors whose every tensor is a
 * `lora_A [r, in]` / `lora_B [out, r]` pair under PEFT's names for an existing layer of the base model.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

const MODULES: Record<string, "self_attn" | "mlp"> = {
  q_proj: "self_attn",
  k_proj: "self_attn",
  v_proj: "self_attn",
  o_proj: "self_attn",
  gate_proj: "mlp",
  up_proj: "mlp",
  down_proj: "mlp",
};
const KEY = /^base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)\.lora_([AB])\.weight$/;

interface BaseShape {
  hidden: number;
  intermediate: number;
  layers: number;
  qOut: number;
  kvOut: number;
}

export function baseShape(config: Record<string, any>): BaseShape {
  const hidden = config.hidden_size as number;
  const heads = config.num_attention_heads as number;
  const headDim = (config.head_dim as number | undefined) ?? hidden / heads;
  return {
    hidden,
    intermediate: config.intermediate_size as number,
    layers: config.num_hidden_layers as number,
    qOut: heads * headDim,
    kvOut: ((config.num_key_value_heads as number | undefined) ?? heads) * headDim,
  };
}

function dims(module: string, b: BaseShape): [number, number] {
  switch (module) {
    case "q_proj":
      return [b.hidden, b.qOut];
    case "k_proj":
    case "v_proj":
      return [b.hidden, b.kvOut];
    case "o_proj":
      return [b.qOut, b.hidden];
    case "down_proj":
      return [b.intermediate, b.hidden];
    default:
      return [b.hidden, b.intermediate];
  }
}

/** Throws an Error whose message says what is wrong; resolves with the adapter's rank and targets. */
export async function checkPeftFolder(
  dir: string,
  base: BaseShape,
  maxLoraRank: number,
): Promise<{ rank: number; targets: string[] }> {
  const configPath = join(dir, "adapter_config.json");
  const weightsPath = join(dir, "adapter_model.safetensors");
  if (!existsSync(configPath)) throw new Error(`no adapter_config.json in ${dir}`);
  if (!existsSync(weightsPath)) throw new Error(`no adapter_model.safetensors in ${dir}`);
  const config = JSON.parse(await readFile(configPath, "utf8")) as Record<string, unknown>;
  if (config.peft_type !== "LORA") throw new Error(`peft_type is ${String(config.peft_type)}, not LORA`);
  const rank = config.r;
  if (!Number.isInteger(rank) || (rank as number) < 1) throw new Error("r must be a positive integer");
  if ((rank as number) > maxLoraRank) {
    throw new Error(`LoRA rank ${rank} is greater than max_lora_rank ${maxLoraRank}`);
  }
  if (typeof config.lora_alpha !== "number") throw new Error("lora_alpha must be a number");
  const targets = typeof config.target_modules === "string" ? [config.target_modules] : config.target_modules;
  if (!Array.isArray(targets) || targets.length === 0) throw new Error("target_modules must list modules");
  for (const t of targets) if (!(t in MODULES)) throw new Error(`target module ${t} is not supported`);

  const bytes = await readFile(weightsPath);
  if (bytes.length < 8) throw new Error("adapter_model.safetensors is truncated");
  const headerLength = Number(bytes.readBigUInt64LE(0));
  if (8 + headerLength > bytes.length) throw new Error("adapter_model.safetensors header is truncated");
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8")) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const seen = new Set<string>();
  for (const [key, info] of Object.entries(header)) {
    if (key === "__metadata__") continue;
    const m = KEY.exec(key);
    if (!m) throw new Error(`unexpected tensor ${key}`);
    const [, layerText, group, module, which] = m;
    const layer = Number(layerText);
    if (layer >= base.layers) throw new Error(`${key}: the base model has ${base.layers} layers`);
    if (MODULES[module!] !== group || !targets.includes(module!))
      throw new Error(`${key}: not a target module`);
    const [inF, outF] = dims(module!, base);
    const r = rank as number;
    const want: [number, number] = which === "A" ? [r, inF] : [outF, r];
    if (info.shape.join() !== want.join()) {
      throw new Error(`${key}: shape [${info.shape}] but [${want}] expected`);
    }
    const [start, end] = info.data_offsets;
    const width = info.dtype === "F32" ? 4 : info.dtype === "BF16" || info.dtype === "F16" ? 2 : 0;
    if (width === 0) throw new Error(`${key}: dtype ${info.dtype} not supported`);
    if (end - start !== width * want[0] * want[1] || 8 + headerLength + end > bytes.length) {
      throw new Error(`${key}: data size does not match its shape`);
    }
    seen.add(key);
  }
  for (let layer = 0; layer < base.layers; layer++) {
    for (const module of targets as string[]) {
      for (const which of ["A", "B"]) {
        const key = `base_model.model.model.layers.${layer}.${MODULES[module]}.${module}.lora_${which}.weight`;
        if (!seen.has(key)) throw new Error(`missing tensor ${key}`);
      }
    }
  }
  return { rank: rank as number, targets: targets as string[] };
}
