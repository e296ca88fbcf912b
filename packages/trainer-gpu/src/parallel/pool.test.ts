import { execFile } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { InvalidArgumentError } from "@agl/core";
import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { Generator } from "../generate/generator.js";
import type { CausalLM } from "../model/causal-lm.js";
import { PolicyModel } from "../model/policy-model.js";
import { servePolicy } from "../ppo/serving.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { PolicyWorkerError } from "./errors.js";
import { type PolicyWorkers, startPolicyWorkers } from "./pool.js";

const tokenizer = new Tokenizer();
const template = new ChatTemplate(tokenizer);
const newModel = (seed: number) =>
  PolicyModel.create({
    vocabSize: tokenizer.vocabSize,
    dModel: 32,
    nLayers: 2,
    nHeads: 4,
    contextLength: 64,
    seed,
  });
let model: PolicyModel;
let pool: PolicyWorkers;

beforeAll(async () => {
  await selectBackend({ backend: "wasm", log: () => {} });
  model = newModel(5);
  pool = await startPolicyWorkers({ model, tokenizer }, { workers: 2 });
});
afterAll(async () => {
  await pool?.close();
  model?.dispose();
});

const prompt = (text: string) => template.encodeChat([{ role: "user", content: text }]).ids;
const requests = (seed: number) =>
  ["1+2?", "what is 7*8", "hello"].map((t, i) => ({
    promptIds: prompt(t),
    seed: seed + i,
    maxTokens: 20,
    temperature: 1,
  }));

async function chat(url: string, seed: number, stream = false): Promise<string> {
  const client = new OpenAI({ baseURL: url, apiKey: "none" });
  const body = { model: "m", messages: [{ role: "user" as const, content: "12+30?" }], max_tokens: 24, seed };
  if (!stream) return (await client.chat.completions.create(body)).choices[0]?.message.content ?? "";
  let text = "";
  for await (const chunk of await client.chat.completions.create({ ...body, stream: true }))
    text += chunk.choices[0]?.delta.content ?? "";
  return text;
}

describe("PolicyWorkers generation", () => {
  it("seeded requests sample exactly the tokens (and log-probs) of the in-process Generator, on either worker", async () => {
    const local = new Generator(model, tokenizer);
    const reqs = requests(100);
    const expected = await Promise.all(reqs.map((r) => local.generate(r)));
    for (const w of [0, 1]) {
      const got = await pool.generate(w, reqs);
      expect(got.map((g) => g.tokenIds)).toEqual(expected.map((e) => e.tokenIds));
      expect(got.map((g) => g.text)).toEqual(expected.map((e) => e.text));
      expect(got.map((g) => g.tokens.map((t) => t.logprob))).toEqual(
        expected.map((e) => e.tokens.map((t) => t.logprob)),
      );
    }
  });

  it("serve: the OpenAI server answers seeded chats (plain and streamed) exactly as the in-process server", async () => {
    const policy = { model, tokenizer, template };
    const pooled = await pool.serve(policy, { modelName: "m" });
    const local = await servePolicy(policy, { modelName: "m" });
    try {
      const seeds = Array.from({ length: 8 }, (_, i) => 40 + i);
      const [a, b] = await Promise.all([
        Promise.all(seeds.map((s) => chat(pooled.url, s))),
        Promise.all(seeds.map((s) => chat(local.url, s))),
      ]);
      expect(a).toEqual(b);
      expect(new Set(a).size).toBeGreaterThan(1);
      expect(await chat(pooled.url, 41, true)).toBe(b[1]);
    } finally {
      await pooled.close();
      await local.close();
    }
  });

  it("swapWeights drains, applies in the main thread, broadcasts and bumps the version", async () => {
    const policy = { model, tokenizer, template };
    const pooled = await pool.serve(policy, { modelName: "m" });
    const before = await chat(pooled.url, 7);
    const other = newModel(9);
    const saved = model.clone();
    try {
      const version = await pooled.swapWeights(() => model.setWeightsFrom(other));
      expect(version).toBe(1);
      const after = await chat(pooled.url, 7);
      const local = new Generator(model, tokenizer);
      const reqs = requests(7);
      const expected = await Promise.all(reqs.map((r) => local.generate(r)));
      // Both workers now hold the new weights: exactly the main model's samples.
      for (const w of [0, 1]) {
        const got = await pool.generate(w, reqs);
        expect(got.map((g) => g.tokenIds)).toEqual(expected.map((e) => e.tokenIds));
      }
      expect(after).not.toBe(before);
      expect(await pooled.swapWeights(() => model.setWeightsFrom(saved))).toBe(2);
      expect(await chat(pooled.url, 7)).toBe(before);
    } finally {
      await pooled.close();
      other.dispose();
      saved.dispose();
    }
  });

  it("an aborted request stops on its worker; a task that throws there is a typed error and the worker lives on", async () => {
    const ac = new AbortController();
    const running = pool.generate(0, [
      {
        promptIds: prompt("x"),
        maxTokens: 60,
        ignoreEos: true,
        signal: ac.signal,
        onToken: () => ac.abort(),
      },
    ]);
    const [r] = await running;
    expect(r?.finishReason).toBe("abort");
    expect(r?.tokenIds.length).toBeLessThan(60);
    const bad = pool.generate(1, [{ promptIds: [tokenizer.vocabSize + 5] }]);
    await expect(bad).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "task_failed" && e.worker === 1,
    );
    const ok = await pool.generate(1, requests(1));
    expect(ok).toHaveLength(3);
  });
});

describe("PolicyWorkers failures and options", () => {
  it("a worker that dies rejects pending and later calls with a typed error (no hang); close() is clean", async () => {
    const m = newModel(2);
    const p = await startPolicyWorkers({ model: m, tokenizer }, { workers: 2 });
    const pending = p.generate(0, [{ promptIds: prompt("x"), maxTokens: 60, ignoreEos: true }]);
    await p.threads[0]?.terminate();
    await expect(pending).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "worker_exited" && e.worker === 0,
    );
    await expect(p.syncWeights()).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "worker_exited",
    );
    await p.close();
    m.dispose();
  });

  it("a script that never calls close() still exits once its work is done", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agl-pool-exit-"));
    const script = join(dir, "forget-close.mts");
    const src = (f: string) => JSON.stringify(fileURLToPath(new URL(f, import.meta.url)));
    writeFileSync(
      script,
      [
        `import { selectBackend } from ${src("../backend/select.ts")};`,
        `import { PolicyModel } from ${src("../model/policy-model.ts")};`,
        `import { Tokenizer } from ${src("../tokenizer/tokenizer.ts")};`,
        `import { startPolicyWorkers } from ${src("./pool.ts")};`,
        `await selectBackend({ backend: "wasm", log: () => {} });`,
        "const tokenizer = new Tokenizer();",
        "const model = PolicyModel.create({ vocabSize: tokenizer.vocabSize, dModel: 16, nLayers: 1, nHeads: 2, contextLength: 16, seed: 1 });",
        "const pool = await startPolicyWorkers({ model, tokenizer }, { workers: 1 });",
        "const [r] = await pool.generate(0, [{ promptIds: [1, 20], seed: 3, maxTokens: 4 }]);",
        'console.log("generated " + r.tokenIds.length);',
      ].join("\n"),
    );
    try {
      const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", script], {
        cwd: fileURLToPath(new URL("../../../..", import.meta.url)),
        timeout: 60_000,
      });
      expect(stdout).toContain("generated 4");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("close() terminates the workers and rejects later calls as closed", async () => {
    const m = newModel(3);
    const p = await startPolicyWorkers({ model: m, tokenizer }, { workers: 1 });
    const exited = new Promise<number>((r) => p.threads[0]?.once("exit", r));
    await p.close();
    await exited;
    await expect(p.generate(0, requests(1))).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "closed",
    );
    m.dispose();
  });

  it("invalid options and unsupported policies are typed errors naming the problem", async () => {
    await expect(startPolicyWorkers({ model, tokenizer }, { workers: 0 })).rejects.toSatisfy(
      (e: unknown) => InvalidArgumentError.isInstance(e) && /workers/.test(e.message),
    );
    await expect(
      startPolicyWorkers({ model, tokenizer }, { workers: 1, threads: 2 } as never),
    ).rejects.toSatisfy((e: unknown) => InvalidArgumentError.isInstance(e));
    const notPolicyModel = { config: model.config } as unknown as CausalLM;
    await expect(startPolicyWorkers({ model: notPolicyModel, tokenizer })).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "unsupported_model",
    );
    await expect(startPolicyWorkers({ model, tokenizer }, { workers: 1, backend: "nope" })).rejects.toSatisfy(
      (e: unknown) => PolicyWorkerError.isInstance(e) && e.code === "start_failed",
    );
    const other = newModel(4);
    await expect(pool.serve({ model: other, tokenizer, template }, { modelName: "m" })).rejects.toSatisfy(
      (e: unknown) => InvalidArgumentError.isInstance(e) && e.field === "policy",
    );
    other.dispose();
    expect(tf.getBackend()).toBe("wasm");
  });
});
