import { readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { loadPretrainedPolicy, type PretrainedPolicy } from "../pretrained/load-policy.js";
import { PolicyServer } from "../server/policy-server.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import { Generator } from "./generator.js";
import type { GenerateResult } from "./request.js";
import { generationConfigDefaults } from "./sampling-defaults.js";

/** generation_config.json's sampling defaults, honoured unless a request says otherwise (vLLM's precedence). */

async function checkpointWith(
  generation: Record<string, unknown>,
): Promise<{ dir: string; policy: PretrainedPolicy }> {
  const dir = await writeTinyPretrainedCheckpoint({ seed: 6 });
  const file = join(dir, "generation_config.json");
  const base = JSON.parse(await readFile(file, "utf8"));
  await writeFile(file, JSON.stringify({ ...base, ...generation }));
  return { dir, policy: await loadPretrainedPolicy(dir) };
}

const sampled = (r: GenerateResult) => r.tokens.map((t) => [t.id, t.samplingLogprob]);

describe("generation_config.json sampling defaults", () => {
  const dirs: string[] = [];
  const policies: PretrainedPolicy[] = [];
  let sampling: PretrainedPolicy;
  let greedy: PretrainedPolicy;
  beforeAll(async () => {
    await selectBackend({ log: () => {} });
    for (const gen of [{ temperature: 0.5, top_p: 0.9, top_k: 5, max_new_tokens: 6 }, { do_sample: false }]) {
      const { dir, policy } = await checkpointWith(gen);
      dirs.push(dir);
      policies.push(policy);
    }
    [sampling, greedy] = policies as [PretrainedPolicy, PretrainedPolicy];
  });
  afterAll(async () => {
    for (const p of policies) p.model.dispose();
    for (const d of dirs) await rm(dirname(d), { recursive: true, force: true });
  });

  it("reads the fields vLLM reads, plus do_sample: false as greedy", () => {
    expect(generationConfigDefaults({ temperature: 0.7, top_p: 0.8, top_k: 20, do_sample: true })).toEqual({
      temperature: 0.7,
      topP: 0.8,
      topK: 20,
    });
    expect(generationConfigDefaults({ do_sample: false, temperature: 0.7 })).toEqual({ temperature: 0 });
    expect(generationConfigDefaults({ max_new_tokens: 128, top_k: 0 })).toEqual({ maxTokens: 128 });
    expect(generationConfigDefaults(null)).toEqual({});
  });

  it("Generator: a request without sampling fields samples as if it had sent the checkpoint's", async () => {
    const gen = new Generator(sampling.model, sampling.tokenizer);
    const promptIds = sampling.tokenizer.encode("hello there");
    const implicit = await gen.generate({ promptIds, seed: 4, maxTokens: 50 });
    const explicit = await gen.generate({
      promptIds,
      seed: 4,
      maxTokens: 6,
      temperature: 0.5,
      topP: 0.9,
      topK: 5,
    });
    expect(sampled(implicit)).toEqual(sampled(explicit));
    // max_new_tokens is a ceiling
    expect(implicit.tokenIds.length).toBeLessThanOrEqual(6);
    // a request's own value wins
    const hot = await gen.generate({ promptIds, seed: 4, temperature: 1 });
    const hotExplicit = await gen.generate({
      promptIds,
      seed: 4,
      maxTokens: 6,
      temperature: 1,
      topP: 0.9,
      topK: 5,
    });
    expect(sampled(hot)).toEqual(sampled(hotExplicit));
    expect(sampled(hot)).not.toEqual(sampled(implicit));
  });

  it("Generator: do_sample false decodes greedily whatever the seed", async () => {
    const gen = new Generator(greedy.model, greedy.tokenizer);
    const promptIds = greedy.tokenizer.encode("hello there");
    const a = await gen.generate({ promptIds, seed: 1, maxTokens: 8 });
    const b = await gen.generate({ promptIds, seed: 2, maxTokens: 8 });
    const argmax = await gen.generate({ promptIds, temperature: 0, maxTokens: 8 });
    expect(a.tokenIds).toEqual(argmax.tokenIds);
    expect(b.tokenIds).toEqual(argmax.tokenIds);
    expect(a.tokens.every((t) => t.samplingLogprob === 0)).toBe(true);
  });

  it("PolicyServer: the same defaults apply to requests through the openai SDK; request values override", async () => {
    const server = new PolicyServer({ ...sampling, modelName: "tiny" });
    await server.start();
    try {
      const client = new OpenAI({ baseURL: server.baseUrl, apiKey: "unused", maxRetries: 0 });
      const ask = async (body: Record<string, unknown>) => {
        const res = (await client.chat.completions.create({
          model: "tiny",
          messages: [{ role: "user", content: "hi" }],
          seed: 8,
          logprobs: true,
          return_token_ids: true,
          ...body,
        } as never)) as unknown as { choices: Array<Record<string, any>> };
        const c = res.choices[0] as Record<string, any>;
        return { ids: c.token_ids as number[], lp: c.logprobs.content.map((e: any) => e.sampling_logprob) };
      };
      const implicit = await ask({});
      expect(implicit.ids.length).toBeLessThanOrEqual(6);
      expect(await ask({ temperature: 0.5, top_p: 0.9, top_k: 5, max_tokens: 6 })).toEqual(implicit);
      expect(await ask({ temperature: 1 })).toEqual(
        await ask({ temperature: 1, top_p: 0.9, top_k: 5, max_tokens: 6 }),
      );
      // a request cannot raise the ceiling
      expect((await ask({ max_tokens: 100 })).ids.length).toBeLessThanOrEqual(6);
      // `samplingDefaults: {}` = vLLM's --generation-config vllm: neutral temperature 1, no top-p/top-k
      const neutral = new PolicyServer({ ...sampling, modelName: "tiny", samplingDefaults: {} });
      await neutral.start();
      try {
        const nclient = new OpenAI({ baseURL: neutral.baseUrl, apiKey: "unused", maxRetries: 0 });
        const nask = async (body: Record<string, unknown>) => {
          const res = await nclient.chat.completions.create({
            model: "tiny",
            messages: [{ role: "user", content: "hi" }],
            seed: 8,
            max_tokens: 6,
            return_token_ids: true,
            ...body,
          } as never);
          return (res as unknown as { choices: Array<{ token_ids: number[] }> }).choices[0]?.token_ids;
        };
        expect(await nask({})).toEqual(await nask({ temperature: 1, top_p: 1 }));
      } finally {
        await neutral.stop();
      }
    } finally {
      await server.stop();
    }
  });
});
