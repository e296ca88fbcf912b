import { type ChatMessage, HfChatTemplate } from "@agl/trainer-gpu";
import {
  MODEL_SHAPE,
  type ModelShape,
  writeInitialCheckpoint,
} from "../../calc-agent-qwen3/src/checkpoint.js";
import {
  asHfTokenizer,
  qwen3TokenizerFiles,
  trimTokenizer,
} from "../../calc-agent-qwen3/src/qwen-tokenizer.js";
import { checkerPrompt, makeSplits, retryPrompt, writerPrompt } from "./task.js";

/**
 * The starting checkpoint: the calc-agent-qwen3 example's Qwen3 writer (config.json `Qwen3ForCausalLM`,
 * model.safetensors under transformers' names, generation_config.json, the real Qwen3 tokenizer and chat
 * template), with the tokenizer trimmed to THIS task's texts. The model is the same tiny shape (hidden 64,
 * 2 layers, 2 heads / 1 key-value head, MLP 192), fresh from `seed`: nothing about the task is in it.
 */

export const MODEL_NAME = "two-role-qwen3";
export { MODEL_SHAPE };

/** Every kind of turn of every problem, rendered by Qwen3's chat template. */
export function taskTexts(): string[] {
  const template = new HfChatTemplate(asHfTokenizer(qwen3TokenizerFiles()));
  const s = makeSplits();
  const texts: string[] = [];
  for (const p of [...s.train, ...s.val, ...s.test].filter((_, i) => i % 6 === 0)) {
    for (const d of p.digits) {
      const chats: ChatMessage[][] = [
        [
          { role: "user", content: writerPrompt(p) },
          { role: "assistant", content: String(d) },
          { role: "user", content: retryPrompt(String(d)) },
          { role: "assistant", content: String(p.answer) },
        ],
        [
          { role: "user", content: checkerPrompt(p, String(d)) },
          { role: "assistant", content: d === p.answer ? "yes" : "no" },
        ],
      ];
      for (const c of chats) texts.push(template.render(c, null, { addGenerationPrompt: false }));
    }
  }
  for (const word of ["yes", "no", "Yes", "No"]) texts.push(word);
  return texts;
}

/** Write the untrained checkpoint to `dir` (weights drawn from `seed`; `shape`: a smaller one for tests). */
export function writeTwoRoleCheckpoint(
  dir: string,
  seed: number,
  shape: ModelShape = MODEL_SHAPE,
): Promise<{ vocabSize: number }> {
  return writeInitialCheckpoint(dir, seed, shape, {
    tokenizer: trimTokenizer(qwen3TokenizerFiles(), taskTexts()),
    name: MODEL_NAME,
  });
}
