import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  type ChatMessage,
  HfChatTemplate,
  type ToolDefinition,
  writeRandomCheckpoint,
} from "@agl/trainer-gpu";
import { chainedSolution, type Demo, demonstrations, makeSplits } from "./dataset.js";
import {
  asHfTokenizer,
  qwen3TokenizerFiles,
  type TrimmedTokenizer,
  trimTokenizer,
} from "./qwen-tokenizer.js";

/**
 * The job's starting checkpoint, a Hugging Face folder in the exact layout transformers and vLLM load:
 * config.json (Qwen3ForCausalLM), model.safetensors (freshly initialised, as `from_config` would),
 * generation_config.json, and the real Qwen3 tokenizer trimmed to the task (tokenizer.json,
 * tokenizer_config.json with Qwen3's chat template and its tool-calling format).
 */

/** Architecture of the job's model: Qwen3 (q/k norms, grouped-query attention, tied embeddings), tiny. */
export const MODEL_SHAPE = {
  hiddenSize: 64,
  intermediateSize: 192,
  numLayers: 2,
  numHeads: 2,
  numKvHeads: 1,
  headDim: 32,
  maxPositionEmbeddings: 512,
} as const;

export type ModelShape = { [K in keyof typeof MODEL_SHAPE]: number };

export const MODEL_NAME = "calc-agent-qwen3";

/** Texts whose encoding the trimmed tokenizer must keep: the rendered transcripts of every kind of turn. */
export function taskTexts(): string[] {
  const full = qwen3TokenizerFiles();
  const template = new HfChatTemplate(asHfTokenizer(full));
  // Problems of every wording; numbers are single digits in Qwen's pre-tokenizer, so these cover the task.
  const problems = makeSplits({ train: 0, demo: 60, val: 0, test: 0 }, 0).demo;
  const demos: Demo[] = [...problems.map(chainedSolution), ...demonstrations(problems, 0, 0)];
  const texts = demos.map((d) =>
    template.render(d.messages as ChatMessage[], d.tools as ToolDefinition[], { addGenerationPrompt: false }),
  );
  // What the calculator answers to a malformed call.
  texts.push("<tool_response>\nerror\n</tool_response>");
  return texts;
}

/** The real Qwen3 tokenizer trimmed to `taskTexts()`. */
export function taskTokenizer(): TrimmedTokenizer {
  return trimTokenizer(qwen3TokenizerFiles(), taskTexts());
}

/**
 * Write the untrained checkpoint to `dir` (weights drawn from `seed`). `task`: another task's trimmed
 * tokenizer and model name (examples/two-role-agent writes its checkpoint with this).
 */
export async function writeInitialCheckpoint(
  dir: string,
  seed: number,
  shape: ModelShape = MODEL_SHAPE,
  task: { tokenizer?: TrimmedTokenizer; name?: string } = {},
): Promise<{ vocabSize: number }> {
  const tok = task.tokenizer ?? taskTokenizer();
  const idOf = (content: string) => tok.tokenizerJson.added_tokens.find((t) => t.content === content)!.id;
  const endOfText = idOf("<|endoftext|>");
  const imEnd = idOf("<|im_end|>");
  const vocabSize = Math.max(...tok.tokenizerJson.added_tokens.map((t) => t.id)) + 1;
  await mkdir(dir, { recursive: true });
  await writeRandomCheckpoint(dir, {
    family: "qwen3",
    seed,
    vocabSize,
    ...shape,
    tieWordEmbeddings: true,
    configStyle: "v5",
    initStd: 0.02,
    extraConfig: { _name_or_path: task.name ?? MODEL_NAME, bos_token_id: endOfText, eos_token_id: imEnd },
  });
  await writeFile(join(dir, "tokenizer.json"), JSON.stringify(tok.tokenizerJson));
  await writeFile(join(dir, "tokenizer_config.json"), `${JSON.stringify(tok.tokenizerConfig, null, 2)}\n`);
  // As Qwen3's own generation_config.json, with sampling at the temperature the policy is trained at.
  const generation = {
    bos_token_id: endOfText,
    eos_token_id: [imEnd, endOfText],
    pad_token_id: endOfText,
    do_sample: true,
    temperature: 1.0,
    top_p: 1.0,
    top_k: 0,
  };
  await writeFile(join(dir, "generation_config.json"), `${JSON.stringify(generation, null, 2)}\n`);
  return { vocabSize };
}
