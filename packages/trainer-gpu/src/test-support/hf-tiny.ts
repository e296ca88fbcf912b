import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selectBackend } from "../backend/select.js";
import { PolicyModel } from "../model/policy-model.js";
import { type SftExample, sft } from "../sft/sft.js";
import { HfChatTemplate } from "../tokenizer/hf-chat-template.js";
import { HfTokenizer } from "../tokenizer/hf-tokenizer.js";
import { writeTinyQwenTokenizer } from "./hf-tokenizer-files.js";
import { CALC_TOOL } from "./tiny.js";

/** A tiny policy behind a real Qwen-style tokenizer.json + chat template (byte-level BPE, ~300 tokens). */
export async function hfTinySetup(seed = 1, contextLength = 768) {
  await selectBackend({ log: () => {} });
  const dir = await mkdtemp(join(tmpdir(), "agl-hf-tiny-"));
  await writeTinyQwenTokenizer(dir);
  const tokenizer = await HfTokenizer.fromDir(dir);
  const template = await HfChatTemplate.fromDir(dir, tokenizer);
  const model = PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    contextLength,
    seed,
  });
  return { dir, tokenizer, template, model };
}

/**
 * The calc transcript in OpenAI form (rendered by the checkpoint's template as Qwen3 would see it). The
 * call is the last turn (Qwen3 then renders an empty `<think>` block before it), or with `withResult` it
 * is followed by the tool's result and the answer, as in a real conversation (no `<think>` before it).
 */
export function hfToolTranscript(a: number, b: number, withResult = false): SftExample {
  const result: SftExample["messages"] = withResult
    ? [
        { role: "tool", tool_call_id: "c1", content: String(a + b) },
        { role: "assistant", content: String(a + b) },
      ]
    : [];
  return {
    tools: [CALC_TOOL],
    messages: [
      { role: "user", content: `${a}+${b}?` },
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "c1",
            type: "function",
            function: { name: "calc", arguments: JSON.stringify({ expr: `${a}+${b}` }) },
          },
        ],
      },
      ...result,
    ],
  };
}

/** A tiny model that has memorised `hfToolTranscript(2, 3, withResult)` under the Qwen template. */
export async function hfToolCallingModel(withResult = false) {
  const setup = await hfTinySetup(3);
  const result = await sft(setup.model, [hfToolTranscript(2, 3, withResult)], {
    template: setup.template,
    steps: 30,
    batchSize: 1,
    learningRate: 2e-2,
    progress: false,
  });
  return { ...setup, sftLosses: result.losses };
}
