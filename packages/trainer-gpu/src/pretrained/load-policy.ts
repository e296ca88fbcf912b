import { HfChatTemplate, type HfChatTemplateOptions } from "../tokenizer/hf-chat-template.js";
import { HfTokenizer } from "../tokenizer/hf-tokenizer.js";
import { PretrainedCheckpointError } from "./errors.js";
import { type LoadedPretrained, type LoadPretrainedOptions, loadPretrained } from "./load.js";
import { applyLora, type LoraOptions } from "./lora.js";
import type { PretrainedModel } from "./pretrained-model.js";

/**
 * One call from a Hugging Face checkpoint folder to everything the generator, `PolicyServer`, `sft()` and
 * `PPO` need: the model (optionally with fresh LoRA adapters), the checkpoint's tokenizer and chat
 * template, and the model name to serve it under.
 */

export interface LoadPretrainedPolicyOptions extends LoadPretrainedOptions {
  /** Attach fresh LoRA adapters (base frozen); omit for full fine-tuning. */
  lora?: LoraOptions;
  /** Chat-template variables such as `{ enable_thinking: false }`. */
  chatTemplate?: Pick<HfChatTemplateOptions, "extraContext">;
}

export interface PretrainedPolicy {
  model: PretrainedModel;
  tokenizer: HfTokenizer;
  template: HfChatTemplate;
  /** `_name_or_path` from config.json, else the folder name (what PolicyServer should report). */
  modelName: string;
  loaded: LoadedPretrained;
}

export async function loadPretrainedPolicy(
  dir: string,
  options: LoadPretrainedPolicyOptions = {},
): Promise<PretrainedPolicy> {
  const { lora, chatTemplate, ...loadOptions } = options;
  const tokenizer = await HfTokenizer.fromDir(dir);
  const template = await HfChatTemplate.fromDir(dir, tokenizer, chatTemplate);
  const loaded = await loadPretrained(dir, loadOptions);
  if (tokenizer.vocabSize > loaded.model.config.vocabSize) {
    loaded.model.dispose();
    throw new PretrainedCheckpointError(
      "invalid_config",
      `${dir}/tokenizer.json`,
      `the tokenizer has ${tokenizer.vocabSize} tokens but the model's vocab_size is ${loaded.model.config.vocabSize}`,
    );
  }
  if (lora) applyLora(loaded.model, lora);
  return { model: loaded.model, tokenizer, template, modelName: loaded.modelName, loaded };
}
