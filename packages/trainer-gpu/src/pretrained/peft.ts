import { mkdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { z } from "zod";
import { DEFAULT_ADAPTER, type LoraState, UnknownAdapterError } from "./adapter-rows.js";
import { PretrainedCheckpointError } from "./errors.js";
import { readJsonFile } from "./load.js";
import { addLoraAdapter } from "./lora.js";
import { peftKey } from "./lora-state.js";
import type { PretrainedModel } from "./pretrained-model.js";
import { type FloatTensor, readSafetensors, readSafetensorsHeader, writeSafetensors } from "./safetensors.js";
import { LINEAR_MODULES, type LinearModule } from "./weights.js";

/**
 * LoRA adapters in PEFT's format, which `peft.PeftModel.from_pretrained` and vLLM's LoRA support load:
 * `adapter_config.json` (`peft_type: "LORA"`, `r`, `lora_alpha`, `target_modules`,
 * `base_model_name_or_path`, ...) and `adapter_model.safetensors` with keys
 * `base_model.model.<module path>.lora_A.weight` (`[r, in]`) and `.lora_B.weight` (`[out, r]`).
 */

export const ADAPTER_CONFIG_FILE = "adapter_config.json";
export const ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors";

export interface ExportPeftOptions {
  /** Hub id or path of the base model, written to `base_model_name_or_path` (default: the source dir). */
  baseModelNameOrPath?: string;
  /** Which adapter of a multi-adapter model (default: the default adapter). */
  adapter?: string;
}

function adapterState(model: PretrainedModel, name: string | undefined): LoraState {
  const lora = model.adapters.get(name ?? DEFAULT_ADAPTER);
  if (lora) return lora;
  if (name !== undefined) throw new UnknownAdapterError(name, model.adapterNames);
  throw new Error("exportPeftAdapter: the model has no LoRA adapters (applyLora first)");
}

export const AdapterConfigSchema = z.looseObject({
  peft_type: z.literal("LORA"),
  r: z.number().int().min(1),
  lora_alpha: z.number().positive(),
  target_modules: z.union([z.array(z.string()), z.string()]),
  use_rslora: z.boolean().optional(),
  use_dora: z.boolean().optional(),
  bias: z.string().optional(),
  base_model_name_or_path: z.string().nullish(),
});

export { peftKey };

/** The adapter tensors under their PEFT names (`lora_A [r,in]`, `lora_B [out,r]`). */
export function peftTensors(model: PretrainedModel, adapter?: string): Map<string, FloatTensor> {
  const lora = adapterState(model, adapter);
  const out = new Map<string, FloatTensor>();
  for (const [path, w] of lora.weights) {
    const [inF, r] = w.a.shape as [number, number];
    const outF = w.b.shape[1] as number;
    const a = tf.tidy(() => tf.transpose(w.a).dataSync() as Float32Array);
    const b = tf.tidy(() => tf.transpose(w.b).dataSync() as Float32Array);
    out.set(peftKey(path, "A"), { shape: [r, inF], data: Float32Array.from(a) });
    out.set(peftKey(path, "B"), { shape: [outF, r], data: Float32Array.from(b) });
  }
  return out;
}

export async function exportPeftAdapter(
  model: PretrainedModel,
  dir: string,
  options: ExportPeftOptions = {},
): Promise<{ dir: string; files: string[] }> {
  const tensors = peftTensors(model, options.adapter);
  const s = adapterState(model, options.adapter).settings;
  await mkdir(dir, { recursive: true });
  await writeSafetensors(join(dir, ADAPTER_WEIGHTS_FILE), tensors);
  const config = {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: options.baseModelNameOrPath ?? model.sourceDir ?? null,
    r: s.rank,
    lora_alpha: s.alpha,
    lora_dropout: 0,
    target_modules: s.targetModules,
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    init_lora_weights: true,
    use_rslora: s.useRslora,
    use_dora: false,
    modules_to_save: null,
    layers_to_transform: null,
    layers_pattern: null,
    rank_pattern: {},
    alpha_pattern: {},
    revision: null,
  };
  await writeFile(join(dir, `${ADAPTER_CONFIG_FILE}.tmp`), `${JSON.stringify(config, null, 2)}\n`);
  await rename(join(dir, `${ADAPTER_CONFIG_FILE}.tmp`), join(dir, ADAPTER_CONFIG_FILE));
  return { dir, files: [ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE] };
}

interface PeftFolder {
  rank: number;
  alpha: number;
  targets: LinearModule[];
  useRslora: boolean;
  tensors: Map<string, FloatTensor>;
}

/** Read and validate a PEFT LoRA folder against `model`'s architecture. */
async function readPeftFolder(model: PretrainedModel, dir: string): Promise<PeftFolder> {
  const cfgPath = join(dir, ADAPTER_CONFIG_FILE);
  const parsed = AdapterConfigSchema.safeParse(await readJsonFile(cfgPath));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new PretrainedCheckpointError(
      "invalid_adapter",
      cfgPath,
      `${issue?.path.join(".")}: ${issue?.message}`,
    );
  }
  const c = parsed.data;
  const unsupported = (msg: string) => new PretrainedCheckpointError("invalid_adapter", cfgPath, msg);
  if (c.use_dora) throw unsupported("DoRA adapters are not supported");
  if (c.bias && c.bias !== "none") throw unsupported(`bias "${c.bias}" is not supported (only "none")`);
  for (const key of ["rank_pattern", "alpha_pattern"]) {
    const v = c[key];
    if (v && typeof v === "object" && Object.keys(v).length > 0) throw unsupported(`${key} is not supported`);
  }
  const targets = typeof c.target_modules === "string" ? [c.target_modules] : c.target_modules;
  const unknown = targets.filter((t) => !(LINEAR_MODULES as readonly string[]).includes(t));
  if (unknown.length > 0) throw unsupported(`target_modules ${JSON.stringify(unknown)} are not supported`);
  const weightsPath = join(dir, ADAPTER_WEIGHTS_FILE);
  const header = await readSafetensorsHeader(weightsPath);
  const sites = model.linearSites.filter((s) => targets.includes(s.module));
  for (const s of sites) {
    for (const [which, shape] of [
      ["A", [c.r, s.inFeatures]],
      ["B", [s.outFeatures, c.r]],
    ] as const) {
      const key = peftKey(s.path, which);
      const e = header.entries.get(key);
      if (!e)
        throw new PretrainedCheckpointError("missing_tensor", weightsPath, "adapter tensor is missing", key);
      if (e.shape.join(",") !== shape.join(",")) {
        throw new PretrainedCheckpointError(
          "shape_mismatch",
          weightsPath,
          `shape [${e.shape}], expected [${shape}]`,
          key,
        );
      }
    }
  }
  const tensors = await readSafetensors(
    weightsPath,
    sites.flatMap((s) => [peftKey(s.path, "A"), peftKey(s.path, "B")]),
  );
  return {
    rank: c.r,
    alpha: c.lora_alpha,
    targets: targets as LinearModule[],
    useRslora: c.use_rslora ?? false,
    tensors,
  };
}

function assignAdapters(lora: LoraState, tensors: Map<string, FloatTensor>): void {
  for (const [path, w] of lora.weights) {
    const a = tensors.get(peftKey(path, "A"))!;
    const b = tensors.get(peftKey(path, "B"))!;
    tf.tidy(() => {
      w.a.assign(tf.transpose(tf.tensor2d(a.data, a.shape as [number, number])));
      w.b.assign(tf.transpose(tf.tensor2d(b.data, b.shape as [number, number])));
    });
  }
}

/**
 * Load a PEFT LoRA adapter folder onto `model` (which must not have adapters yet): applies LoRA with the
 * folder's settings and sets the adapter weights. Options PEFT has but this model cannot reproduce
 * (DoRA, per-layer rank/alpha patterns, trained biases, unknown target modules) are rejected.
 */
export async function loadPeftAdapter(
  model: PretrainedModel,
  dir: string,
  options: { adapter?: string } = {},
): Promise<PretrainedModel> {
  const f = await readPeftFolder(model, dir);
  const name = options.adapter ?? DEFAULT_ADAPTER;
  if (name === DEFAULT_ADAPTER && model.lora)
    throw new Error("applyLora: the model already has LoRA adapters (mergeLora first)");
  addLoraAdapter(model, name, {
    rank: f.rank,
    alpha: f.alpha,
    targetModules: f.targets,
    useRslora: f.useRslora,
  });
  assignAdapters(model.adapters.get(name)!, f.tensors);
  return model;
}

/** Copy adapter weights from a PEFT folder into a model that already has the same LoRA layout (resume). */
export async function restorePeftAdapter(
  model: PretrainedModel,
  dir: string,
  options: { adapter?: string } = {},
): Promise<void> {
  const s = model.adapters.get(options.adapter ?? DEFAULT_ADAPTER)?.settings;
  const f = await readPeftFolder(model, dir);
  if (
    !s ||
    s.rank !== f.rank ||
    s.alpha !== f.alpha ||
    s.targetModules.join() !==
      [...f.targets].sort((x, y) => LINEAR_MODULES.indexOf(x) - LINEAR_MODULES.indexOf(y)).join()
  ) {
    throw new PretrainedCheckpointError(
      "invalid_adapter",
      join(dir, ADAPTER_CONFIG_FILE),
      "adapter settings differ from the model's LoRA settings",
    );
  }
  assignAdapters(model.adapters.get(options.adapter ?? DEFAULT_ADAPTER)!, f.tensors);
}
