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

  it("a burst of mixed-adapter requests admitted at once, extending a cached prefix, all get answers", async () => {
    const opening = "you are the writer. propose an answer: ";
    const post = (name: string, prompt: string, seed: number) =>
      fetch(`${server.baseUrl}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: name, prompt, max_tokens: 4, temperature: 1, seed, logprobs: 1 }),
      });
    const names = ["base", "planner", "checker"];
    // Each name's opening is cached; the burst's prompts (several lengths per name) extend it.
    for (const r of await Promise.all(names.map((n, i) => post(n, `${opening}?`, i))))
      expect(r.status).toBe(200);
    const questions = ["12 + 7 = ?", "3 + 4 + 5 = ?", "100 + 23 + 4 = ?", "8 = ?"];
    const burst = names.flatMap((n) => questions.map((q) => ({ n, prompt: opening + q })));
    await server.pause();
    const answers = burst.map(async ({ n, prompt }, i) => {
      const res = await post(n, prompt, 100 + i);
      const body = (await res.json()) as any;
      expect([res.status, body.error?.message]).toEqual([200, undefined]);
      return body.choices[0].logprobs.tokens.length;
    });
    while (server.generator.queuedCount < burst.length) await new Promise((r) => setTimeout(r, 5));
    server.resume();
    expect(await Promise.all(answers)).toEqual(burst.map(() => 4));
  });

  it("a client that disconnects from a running request frees its row", async () => {
    const ctrl = new AbortController();
    const res = fetch(`${server.baseUrl}/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "planner", prompt: PROMPT, max_tokens: 400, ignore_eos: true }),
      signal: ctrl.signal,
    }).catch((e: unknown) => e);
    while (server.generator.activeCount === 0) await new Promise((r) => setTimeout(r, 2));
    const steps = server.generator.steps;
    ctrl.abort();
    expect(await res).toBeInstanceOf(Error);
    while (server.generator.activeCount > 0) await new Promise((r) => setTimeout(r, 2));
    // 400 tokens were asked for; the row left long before.
    expect(server.generator.steps - steps).toBeLessThan(300);
    const after = await complete("checker");
    expect(after.status).toBe(200);
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
