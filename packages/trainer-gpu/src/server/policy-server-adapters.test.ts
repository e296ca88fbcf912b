import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { loadPretrained } from "../pretrained/load.js";
import { addLoraAdapter } from "../pretrained/lora.js";
import type { PretrainedModel } from "../pretrained/pretrained-model.js";
import { writeRandomCheckpoint } from "../pretrained/random-checkpoint.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PolicyServer } from "./policy-server.js";

/** One PolicyServer serving the base and two LoRA adapters under their own names (vLLM's multi-LoRA). */

let root: string;
let model: PretrainedModel;
let server: PolicyServer;
const tokenizer = new Tokenizer();

beforeAll(async () => {
  await selectBackend({ log: () => {} });
  root = await mkdtemp(join(tmpdir(), "agl-serve-lora-"));
  await writeRandomCheckpoint(join(root, "base"), {
    family: "qwen3",
    seed: 5,
    vocabSize: tokenizer.vocabSize,
    initStd: 0.2,
  });
  model = (await loadPretrained(join(root, "base"))).model;
  for (const [name, seed] of [
    ["planner", 1],
    ["checker", 2],
  ] as const) {
    addLoraAdapter(model, name, { rank: 4, alpha: 16, seed });
    let i = 0;
    for (const w of model.adapters.get(name)!.weights.values())
      w.b.assign(tf.randomNormal(w.b.shape, 0, 0.5, "float32", seed * 1000 + i++));
  }
  server = new PolicyServer({ model, tokenizer, template: new ChatTemplate(tokenizer), modelName: "base" });
  await server.start();
});

afterAll(async () => {
  await server?.stop();
  model?.dispose();
  await rm(root, { recursive: true, force: true });
});

const PROMPT = tokenizer.encode("hello there");
async function complete(name: string, maxTokens = 8) {
  const res = await fetch(`${server.baseUrl}/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: name,
      prompt: PROMPT,
      max_tokens: maxTokens,
      temperature: 0,
      ignore_eos: true,
      return_token_ids: true,
    }),
  });
  return { status: res.status, body: (await res.json()) as any };
}

describe("PolicyServer with several adapters", () => {
  it("/v1/models lists the base and every adapter (parent = the base)", async () => {
    const res = (await (await fetch(`${server.baseUrl}/models`)).json()) as any;
    expect(res.data.map((m: any) => [m.id, m.parent])).toEqual([
      ["base", null],
      ["planner", "base"],
      ["checker", "base"],
    ]);
  });

  it("requests for different adapters decode in one batch and each equals its adapter run alone", async () => {
    const alone: Record<string, number[]> = {};
    for (const name of ["base", "planner", "checker"]) {
      const r = await complete(name);
      expect(r.status).toBe(200);
      expect(r.body.model).toBe(name);
      alone[name] = r.body.choices[0].token_ids;
    }
    // Each adapter samples its own continuation from the same prompt.
    expect(new Set(Object.values(alone).map((ids) => ids.join())).size).toBe(3);
    const before = server.generator.steps;
    const together = await Promise.all(["base", "planner", "checker", "planner"].map((n) => complete(n)));
    expect(together.map((r) => r.body.choices[0].token_ids)).toEqual([
      alone.base,
      alone.planner,
      alone.checker,
      alone.planner,
    ]);
    // Batched: the four sequences took (at most) as many decode steps as one of them alone would, were they
    // admitted together; they could not have if each adapter needed its own batch.
    expect(server.generator.steps - before).toBeLessThan(4 * 7);
  });

  it("an unknown model name is vLLM's 404 naming the field", async () => {
    const r = await complete("executor");
    expect(r.status).toBe(404);
    expect(r.body.error.param).toBe("model");
    expect(r.body.error.code).toBe("model_not_found");
    expect(r.body.error.message).toMatch(/executor.*base, planner, checker/);
  });

  it("an explicit name → adapter map serves only those names; a missing adapter is refused up front", () => {
    const s = new PolicyServer({
      model,
      tokenizer,
      template: new ChatTemplate(tokenizer),
      modelName: "raw",
      adapters: { writer: "planner" },
    });
    expect(s.models.list().map((m) => [m.name, m.adapter])).toEqual([
      ["raw", undefined],
      ["writer", "planner"],
    ]);
    expect(
      () =>
        new PolicyServer({
          model,
          tokenizer,
          template: new ChatTemplate(tokenizer),
          adapters: { writer: "nope" },
        }),
    ).toThrow(/adapters.writer.*no LoRA adapter "nope"/);
  });
});
