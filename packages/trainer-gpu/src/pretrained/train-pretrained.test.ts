import { existsSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { PolicyServer } from "../server/policy-server.js";
import { sft } from "../sft/sft.js";
import { hfToolTranscript } from "../test-support/hf-tiny.js";
import { CALC_TOOL } from "../test-support/tiny.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { loadPretrainedPolicy } from "./load-policy.js";
import { exportPeftAdapter } from "./peft.js";

/** sft() on a loaded Hugging Face checkpoint with LoRA, served by PolicyServer under the checkpoint's name. */

let dir: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ family: "qwen3", seed: 1, name: "tiny-qwen3-ckpt" });
}, 60_000);
afterAll(async () => {
  await rm(dirname(dir), { recursive: true, force: true });
});

describe("training a loaded checkpoint", () => {
  it("SFT with LoRA lowers the loss, trains only adapters, and the server replies with the learnt tool call", async () => {
    const policy = await loadPretrainedPolicy(dir, { lora: { rank: 8, alpha: 16 } });
    expect(policy.modelName).toBe("tiny-qwen3-ckpt");
    const frozen = policy.model.variable("model.layers.0.self_attn.q_proj.weight");
    const before = frozen.dataSync().slice();
    expect(policy.model.trainableVariables.every((v) => /lora_[AB]/.test(v.name))).toBe(true);

    const result = await sft(policy.model, [hfToolTranscript(2, 3)], {
      template: policy.template,
      steps: 30,
      batchSize: 1,
      learningRate: 3e-2,
      progress: false,
    });
    const first = result.losses.slice(0, 3).reduce((a, b) => a + b) / 3;
    const last = result.losses.slice(-3).reduce((a, b) => a + b) / 3;
    expect(last).toBeLessThan(first * 0.5);
    expect(Array.from(frozen.dataSync())).toEqual(Array.from(before));

    const server = new PolicyServer({ ...policy, modelName: policy.modelName });
    await server.start();
    try {
      const client = new OpenAI({ baseURL: server.baseUrl, apiKey: "x", maxRetries: 0 });
      const res = await client.chat.completions.create({
        model: policy.modelName,
        messages: hfToolTranscript(2, 3).messages.slice(0, 1) as OpenAI.ChatCompletionMessageParam[],
        tools: [CALC_TOOL] as OpenAI.ChatCompletionTool[],
        temperature: 0,
        max_tokens: 60,
      });
      expect(res.model).toBe("tiny-qwen3-ckpt");
      expect(res.choices[0]?.finish_reason).toBe("tool_calls");
      const call = res.choices[0]?.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect(call.function).toEqual({ name: "calc", arguments: '{"expr": "2+3"}' });
    } finally {
      await server.stop();
    }

    const out = join(dirname(dir), "adapter");
    await exportPeftAdapter(policy.model, out);
    const cfg = JSON.parse(await readFile(join(out, "adapter_config.json"), "utf8"));
    expect(cfg.r).toBe(8);
    expect(existsSync(join(out, "adapter_model.safetensors"))).toBe(true);
    policy.model.dispose();
    expect(tf.memory().numTensors).toBeGreaterThanOrEqual(0);
  }, 180_000);
});
