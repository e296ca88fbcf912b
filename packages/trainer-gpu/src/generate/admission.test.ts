import * as tf from "@tensorflow/tfjs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import { parseHfConfig } from "../pretrained/hf-config.js";
import { addLoraAdapter } from "../pretrained/lora.js";
import { PretrainedModel } from "../pretrained/pretrained-model.js";
import { randomCheckpointConfig } from "../pretrained/random-checkpoint.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { Generator } from "./generator.js";
import type { GenerateRequest, GenerateResult } from "./request.js";

/**
 * Admission of bursts of mixed-adapter requests into a running batch, and what a failure does to it:
 * every request handed to the Generator settles (a result or an error), whatever happens to its
 * neighbours. A request that is never settled hangs its HTTP client forever, or, in a process where
 * nothing else is pending, lets Node exit with status 0 in the middle of a run.
 */

const tokenizer = new Tokenizer({ chars: "abcdefghijklmnopqrstuvwxyz0123456789 .,!?:+=" });
const ADAPTERS = ["writer", "checker", "broken"] as const;
let m: PretrainedModel;

beforeAll(async () => {
  await selectBackend({ log: () => {} });
  const { arch } = parseHfConfig(
    randomCheckpointConfig({ family: "qwen3", seed: 11, vocabSize: tokenizer.vocabSize }),
  );
  m = PretrainedModel.random(arch, 11, { std: 0.3 });
  for (const [i, name] of ADAPTERS.entries()) {
    addLoraAdapter(m, name, { rank: 2, seed: i + 1 });
    let k = 0;
    for (const w of m.adapters.get(name)?.weights.values() ?? [])
      w.b.assign(tf.randomNormal(w.b.shape, 0, 0.4, "float32", 100 * i + k++));
  }
});

afterAll(() => m?.dispose());

// The writer/checker prompts of an agent: one shared opening, then each request's own text, so their
// lengths differ and their block-aligned prefixes extend the opening's.
const OPENING = "you are the writer. propose an answer: ";
const QUESTIONS = ["12 + 7 = ?", "3 + 4 + 5 = ?", "9 + 1 = ?", "100 + 23 + 4 = ?", "8 + 8 = ?", "1 + 2 = ?"];
const request = (text: string, adapter: string, seed: number, maxTokens = 6): GenerateRequest => ({
  promptIds: tokenizer.encode(text),
  adapter,
  maxTokens,
  temperature: 0.9,
  seed,
  ignoreEos: true,
});

/** Each request alone on a fresh generator without a prefix cache: nothing shared with anything. */
async function alone(requests: GenerateRequest[]): Promise<GenerateResult[]> {
  const out: GenerateResult[] = [];
  for (const r of requests) out.push(await new Generator(m, tokenizer, { prefixCache: false }).generate(r));
  return out;
}

function expectSame(a: GenerateResult[], b: GenerateResult[]) {
  expect(a.map((r) => r.tokenIds)).toEqual(b.map((r) => r.tokenIds));
  a.forEach((r, i) => {
    r.tokens.forEach((t, j) => {
      expect(Math.abs(t.logprob - (b[i]?.tokens[j]?.logprob as number))).toBeLessThan(1e-4);
    });
  });
}

/** A promise's outcome, readable synchronously once it settled. */
function track<T>(p: Promise<T>) {
  const state: { status: "pending" | "fulfilled" | "rejected"; value?: T; error?: unknown } = {
    status: "pending",
  };
  p.then(
    (value) => Object.assign(state, { status: "fulfilled", value }),
    (error) => Object.assign(state, { status: "rejected", error }),
  );
  return state;
}

/** Resolves once the generator holds no request, running or queued (then all it was given must be settled). */
async function idle(gen: Generator): Promise<void> {
  while (gen.activeCount + gen.queuedCount > 0) await new Promise((r) => setTimeout(r, 2));
  // Let the settled promises' callbacks run.
  await new Promise((r) => setImmediate(r));
}

/** `model` with `method` replaced by `impl` (given the original), for this test only. */
function patch<K extends "prefillMany" | "prefillAfter" | "decodeStep">(
  model: PretrainedModel,
  method: K,
  impl: (
    original: PretrainedModel[K],
    ...args: Parameters<PretrainedModel[K]>
  ) => ReturnType<PretrainedModel[K]>,
): () => void {
  const original = model[method].bind(model) as PretrainedModel[K];
  (model as unknown as Record<string, unknown>)[method] = (...args: Parameters<PretrainedModel[K]>) =>
    impl(original, ...args);
  return () => {
    delete (model as unknown as Record<string, unknown>)[method];
  };
}

describe("Generator admission", () => {
  it("a burst extending a cached prefix, at several lengths and adapters, all completes as if alone", async () => {
    const gen = new Generator(m, tokenizer);
    // Cache the opening (its first 32 tokens, two blocks) for both adapters.
    await gen.generateMany(["writer", "checker"].map((a, i) => request(`${OPENING}?`, a, i)));
    const burst = QUESTIONS.flatMap((q, i) => [
      request(OPENING + q, "writer", 10 + i),
      request(`${OPENING}${q} ok?`, "checker", 20 + i),
    ]);
    // Admitted in one step: every prompt matches the cached opening, and each length is its own prefill
    // group whose prompt, cached after it ran, extends (so replaces) the very entry the others matched.
    await gen.pause();
    const results = burst.map((r) => track(gen.generate(r)));
    expect(gen.queuedCount).toBe(burst.length);
    gen.resume();
    await idle(gen);
    expect(results.filter((s) => s.status !== "fulfilled").map((s) => [s.status, String(s.error)])).toEqual(
      [],
    );
    expectSame(
      results.map((s) => s.value as GenerateResult),
      await alone(burst),
    );
    expect(gen.prefixCacheStats?.hits).toBeGreaterThanOrEqual(burst.length);
  });

  it("a failed prefill fails only its own requests; the running batch and other adapters go on", async () => {
    const fail = (rows: ReadonlyArray<string | null | undefined> | undefined) => {
      if (rows?.includes("broken")) throw new Error("prefill failed");
    };
    const restore = [
      patch(m, "prefillMany", (original, prompts, rows) => {
        fail(rows);
        return original(prompts, rows);
      }),
      patch(m, "prefillAfter", (original, prefix, prompts, rows) => {
        fail(rows);
        return original(prefix, prompts, rows);
      }),
    ];
    try {
      const gen = new Generator(m, tokenizer);
      const running = request(OPENING + QUESTIONS[0], "writer", 1, 12);
      const others = [request(OPENING + QUESTIONS[1], "checker", 2), request(`${OPENING}?`, "writer", 3)];
      const a = track(gen.generate(running));
      expect(gen.activeCount).toBe(1);
      // Queued behind the running row and admitted together at its next step.
      const b = track(gen.generate(request(OPENING + QUESTIONS[2], "broken", 4)));
      const rest = others.map((r) => track(gen.generate(r)));
      await idle(gen);
      expect([a, b, ...rest].map((s) => s.status)).toEqual([
        "fulfilled",
        "rejected",
        "fulfilled",
        "fulfilled",
      ]);
      expect(String(b.error)).toMatch(/prefill failed/);
      restore.forEach((r) => {
        r();
      });
      restore.length = 0;
      expectSame(
        [a, ...rest].map((s) => s.value as GenerateResult),
        await alone([running, ...others]),
      );
    } finally {
      for (const r of restore) r();
    }
  });

  it("a failed decode step fails the running requests and no queued one; the next admission runs", async () => {
    let failures = 1;
    const restore = patch(m, "decodeStep", (original, ...args) => {
      if (failures > 0 && args[0].length === 2) {
        failures--;
        throw new Error("decode failed");
      }
      return original(...args);
    });
    try {
      const gen = new Generator(m, tokenizer, { maxBatchSize: 2 });
      const queued = [
        request(OPENING + QUESTIONS[3], "checker", 7),
        request(OPENING + QUESTIONS[4], "writer", 8),
      ];
      const running = [0, 1].map((i) => track(gen.generate(request(OPENING + QUESTIONS[i], "writer", i))));
      const waiting = queued.map((r) => track(gen.generate(r)));
      await idle(gen);
      expect([...running, ...waiting].map((s) => s.status)).toEqual([
        "rejected",
        "rejected",
        "fulfilled",
        "fulfilled",
      ]);
      expect(String(running[0]?.error)).toMatch(/decode failed/);
      restore();
      expectSame(
        waiting.map((s) => s.value as GenerateResult),
        await alone(queued),
      );
    } finally {
      restore();
    }
  });

  it("an aborted request leaves the batch: queued ones at once, running ones after their current step", async () => {
    const gen = new Generator(m, tokenizer, { maxBatchSize: 1 });
    const first = new AbortController();
    const second = new AbortController();
    const running = gen.generate({ ...request(OPENING, "writer", 1, 200), signal: first.signal });
    const queued = gen.generate({ ...request(OPENING, "checker", 2, 200), signal: second.signal });
    const after = request(OPENING + QUESTIONS[0], "checker", 3);
    const last = gen.generate(after);
    second.abort();
    const q = await queued;
    expect([q.finishReason, q.tokenIds]).toEqual(["abort", []]);
    const steps = gen.steps;
    first.abort();
    const r = await running;
    expect(r.finishReason).toBe("abort");
    expect(r.tokenIds.length).toBeLessThan(200);
    // The aborted row took at most one more step; the request behind it then ran normally.
    expect(gen.steps - steps).toBeLessThanOrEqual(1);
    expectSame([await last], await alone([after]));
  });
});
