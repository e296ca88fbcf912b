import { selectBackend } from "../backend/select.js";
import { PolicyModel } from "../model/policy-model.js";
import { type SftExample, sft } from "../sft/sft.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import type { ToolDefinition } from "../tokenizer/messages.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";

/** Shared fixtures for this package's tests: tiny models on the fastest local backend. */

export async function tinySetup(seed = 1, contextLength = 128) {
  await selectBackend({ log: () => {} });
  const tokenizer = new Tokenizer();
  const template = new ChatTemplate(tokenizer);
  const model = PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    contextLength,
    seed,
  });
  return { tokenizer, template, model };
}

/** The smallest useful policy (d=8, one layer, two heads, context 16) for checkpoint and wiring tests. */
export function microModel(vocabSize: number, seed: number): PolicyModel {
  return PolicyModel.create({ vocabSize, dModel: 8, nLayers: 1, nHeads: 2, contextLength: 16, seed });
}

export const CALC_TOOL: ToolDefinition = {
  type: "function",
  function: {
    name: "calc",
    description: "Evaluate an arithmetic expression",
    parameters: { type: "object", properties: { expr: { type: "string" } }, required: ["expr"] },
  },
};

/** A transcript where the assistant calls `calc`, then answers with the tool result. */
export function toolTranscript(a: number, b: number): SftExample {
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
      { role: "tool", tool_call_id: "c1", content: String(a + b) },
      { role: "assistant", content: `It is ${a + b}.` },
    ],
  };
}

/** A tiny model that has memorised `toolTranscript(2, 3)` well enough to call the tool greedily. */
export async function toolCallingModel() {
  const setup = await tinySetup(3, 128);
  const result = await sft(setup.model, [toolTranscript(2, 3)], {
    template: setup.template,
    steps: 150,
    batchSize: 1,
    learningRate: 1e-2,
    progress: false,
  });
  return { ...setup, sftLosses: result.losses };
}
