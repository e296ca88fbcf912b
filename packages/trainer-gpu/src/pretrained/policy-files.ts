import { existsSync } from "node:fs";
import { join } from "node:path";
import type { CausalLM } from "../model/causal-lm.js";
import { loadCheckpoint, saveCheckpoint } from "../model/checkpoint.js";
import { PolicyModel } from "../model/policy-model.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import type { ChatEncoder, TextTokenizer } from "../tokenizer/text-tokenizer.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { BaseModelView } from "./base-view.js";
import { exportPretrained } from "./export.js";
import { loadPretrained } from "./load.js";
import { ADAPTER_CONFIG_FILE, exportPeftAdapter, restorePeftAdapter } from "./peft.js";
import { PretrainedModel } from "./pretrained-model.js";

/**
 * Saving and restoring a policy inside a training checkpoint, whatever its kind: the package's own
 * `PolicyModel` in its checkpoint format; a loaded `PretrainedModel` in the exported, servable form — a
 * Hugging Face folder for full fine-tuning, a PEFT adapter folder (base = the checkpoint it was loaded
 * from) for LoRA. A LoRA reference policy is the base itself and is not saved.
 */

export interface PolicyFileOptions {
  tokenizer: TextTokenizer;
  template?: ChatEncoder;
  metadata?: Record<string, unknown>;
}

/**
 * A multi-adapter model's adapters, one PEFT folder each (`dir/<adapter>/`), every one loadable with
 * `PeftModel.from_pretrained(base, dir/<adapter>)` or `vllm serve --lora-modules <adapter>=dir/<adapter>`.
 */
export async function exportPeftAdapters(
  model: PretrainedModel,
  dir: string,
  options: { baseModelNameOrPath?: string } = {},
): Promise<string[]> {
  const dirs: string[] = [];
  for (const name of model.adapterNames) {
    const out = join(dir, name);
    await exportPeftAdapter(model, out, { ...options, adapter: name });
    dirs.push(out);
  }
  return dirs;
}

/** Save `model` to `dir`; false when there was nothing to save (a LoRA model's base-view reference). */
export async function savePolicyFiles(
  dir: string,
  model: CausalLM,
  options: PolicyFileOptions,
): Promise<boolean> {
  if (model instanceof BaseModelView) return false;
  if (model instanceof PretrainedModel) {
    if (model.lora) await exportPeftAdapter(model, dir);
    else if (model.adapters.size > 0) await exportPeftAdapters(model, dir);
    else await exportPretrained(model, dir);
    return true;
  }
  if (model instanceof PolicyModel) {
    const { tokenizer, template } = options;
    if (
      !(tokenizer instanceof Tokenizer) ||
      (template !== undefined && !(template instanceof ChatTemplate))
    ) {
      throw new Error(
        "savePolicyFiles: a PolicyModel checkpoint stores the character-level Tokenizer and ChatTemplate only",
      );
    }
    await saveCheckpoint(dir, model, { ...options, tokenizer, template });
    return true;
  }
  throw new Error("savePolicyFiles: unsupported model type");
}

/** Copy the weights saved by `savePolicyFiles` in `dir` into `model`. */
export async function restorePolicyFiles(dir: string, model: CausalLM): Promise<void> {
  if (model instanceof BaseModelView) return;
  if (model instanceof PretrainedModel) {
    if (!model.lora && model.adapters.size > 0) {
      for (const name of model.adapterNames)
        await restorePeftAdapter(model, join(dir, name), { adapter: name });
      return;
    }
    if (existsSync(join(dir, ADAPTER_CONFIG_FILE))) {
      await restorePeftAdapter(model, dir);
      return;
    }
    const loaded = await loadPretrained(dir);
    try {
      model.setWeightsFrom(loaded.model);
    } finally {
      loaded.model.dispose();
    }
    return;
  }
  const saved = await loadCheckpoint(dir);
  try {
    model.setWeightsFrom(saved.model);
  } finally {
    saved.model.dispose();
  }
}
