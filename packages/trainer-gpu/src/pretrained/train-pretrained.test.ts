import { existsSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { PolicyServer } from "../server/policy-server.js";
import { type SftExample, sft } from "../sft/sft.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { loadPretrainedPolicy } from "./load-policy.js";
import { exportPeftAdapter } from "./peft.js";

/** sft() on a loaded Hugging Face checkpoint (full and LoRA), served by PolicyServer under the checkpoint's name. */

const GREETING: SftExample = {
  messages: [
    { role: "user", content: "Say hi" },
    { role: "assistant", content: "hello there" },
  ],
};

let dir: string;
beforeAll(async () => {
  await selectBackend({ log: () => {} });
  dir = await writeTinyPretrainedCheckpoint({ family: "qwen3", seed: 1, name: "tiny-qwen3-ckpt" });
});
afterAll(async () => {
  await rm(dirname(dir), { recursive: true, force: true });
});

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

describe("training a loaded checkpoint", () => {
  it("full fine-tuning lowers the loss and the server, named after the checkpoint, replies with the learnt text", async () => {
    const policy = await loadPretrainedPolicy(dir);
    expect(policy.modelName).toBe("tiny-qwen3-ckpt");
    const result = await sft(policy.model, [GREETING], {
      template: policy.template,
      steps: 25,
      batchSize: 1,
      learningRate: 2e-2,
      progress: false,
    });
    expect(mean(result.losses.slice(-3))).toBeLessThan(mean(result.losses.slice(0, 3)) * 0.2);

    // The server reports the checkpoint's name by default.
    const server = new PolicyServer({
      model: policy.model,
      tokenizer: policy.tokenizer,
      template: policy.template,
    });
    await server.start();
    try {
      const client = new OpenAI({ baseURL: server.baseUrl, apiKey: "x", maxRetries: 0 });
      const res = await client.chat.completions.create({
        model: "tiny-qwen3-ckpt",
        messages: [{ role: "user", content: "Say hi" }],
        temperature: 0,
        max_tokens: 30,
      });
      expect(res.model).toBe("tiny-qwen3-ckpt");
      expect(res.choices[0]?.message.content).toBe("<think>\n\n</think>\n\nhello there");
      expect(res.choices[0]?.finish_reason).toBe("stop");
    } finally {
      await server.stop();
      policy.model.dispose();
    }
  });

  it("LoRA SFT lowers the loss with the base frozen, and exports a PEFT adapter", async () => {
    const policy = await loadPretrainedPolicy(dir, { lora: { rank: 8, alpha: 16 } });
    const frozen = policy.model.variable("model.layers.0.self_attn.q_proj.weight");
    const before = Array.from(frozen.dataSync());
    expect(policy.model.trainableVariables.every((v) => /lora_[AB]/.test(v.name))).toBe(true);
    const result = await sft(policy.model, [GREETING], {
      template: policy.template,
      steps: 25,
      batchSize: 1,
      learningRate: 2e-2,
      progress: false,
    });
    expect(mean(result.losses.slice(-3))).toBeLessThan(mean(result.losses.slice(0, 3)) * 0.5);
    expect(Array.from(frozen.dataSync())).toEqual(before);

    const out = join(dirname(dir), "adapter");
    await exportPeftAdapter(policy.model, out);
    const cfg = JSON.parse(await readFile(join(out, "adapter_config.json"), "utf8"));
    expect(cfg.r).toBe(8);
    expect(existsSync(join(out, "adapter_model.safetensors"))).toBe(true);
    policy.model.dispose();
  });
});
