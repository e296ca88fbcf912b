import { copyFile, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { type ChatMessage, HfChatTemplate, type ToolDefinition } from "@agl/trainer-gpu";
import { baseCorpus } from "./base-corpus.js";
import { taskTexts } from "./checkpoint.js";
import {
  asHfTokenizer,
  qwen3TokenizerFiles,
  type TrimmedTokenizer,
  trimTokenizer,
} from "./qwen-tokenizer.js";

/**
 * A pretrained base for the job: a Qwen3 checkpoint of the job's shape, pretrained by src/pretrain-base.ts
 * on the generic corpus (src/base-corpus.ts) and written in Hugging Face layout. The job starts from one
 * with `--base DIR` as a user starts from a downloaded Qwen.
 */

/** The files of a Hugging Face checkpoint folder the job reads. */
export const CHECKPOINT_FILES = [
  "config.json",
  "generation_config.json",
  "model.safetensors",
  "tokenizer.json",
  "tokenizer_config.json",
] as const;

/** Corpus chats whose rendering the base's tokenizer is trimmed over (besides the task's texts). */
export const BASE_VOCAB_CHATS = 3000;

/** The texts the base's tokenizer keeps exactly: the task's and a sample of the corpus rendered. */
export function baseTexts(): string[] {
  const template = new HfChatTemplate(asHfTokenizer(qwen3TokenizerFiles()));
  const corpus = baseCorpus(BASE_VOCAB_CHATS, 0).map((d) =>
    template.render(d.messages as ChatMessage[], d.tools as ToolDefinition[], { addGenerationPrompt: false }),
  );
  return [...taskTexts(), ...corpus];
}

/** The real Qwen3 tokenizer trimmed to the task and the base corpus. */
export function baseTokenizer(): TrimmedTokenizer {
  return trimTokenizer(qwen3TokenizerFiles(), baseTexts());
}

/** Copy the checkpoint in `from` to `to` (the job's `<out>/initial`). */
export async function copyCheckpoint(from: string, to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  for (const f of CHECKPOINT_FILES) await copyFile(join(from, f), join(to, f));
}
