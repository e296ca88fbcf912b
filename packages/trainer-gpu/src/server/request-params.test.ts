import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { GenerateResult } from "../generate/request.js";
import { tinySetup } from "../test-support/tiny.js";
import { ChatTemplate } from "../tokenizer/chat-template.js";
import { Tokenizer } from "../tokenizer/tokenizer.js";
import { assistantMessage, completionFinishReason } from "./format.js";
import { PolicyServer } from "./policy-server.js";

/**
 * Sampling parameters and limits as they arrive over HTTP through the real `openai` SDK, on an untrained
 * (near-uniform) model: there, top-k / top-p visibly change which tokens can be drawn.
 */

type Setup = Awaited<ReturnType<typeof tinySetup>>;
type Ext = Record<string, any>;
const CTX = 64;
let s: Setup;
let server: PolicyServer;
let client: OpenAI;

beforeAll(async () => {
  s = await tinySetup(31, CTX);
  server = new PolicyServer({
    model: s.model,
    tokenizer: s.tokenizer,
    template: s.template,
    modelName: "tiny",
  });
  await server.start();
  client = new OpenAI({ baseURL: server.baseUrl, apiKey: "none", maxRetries: 0 });
});

afterAll(async () => {
  await server?.stop();
  s?.model.dispose();
});

const user = [{ role: "user" as const, content: "go" }];

async function chat(extra: Record<string, unknown>): Promise<OpenAI.ChatCompletion & Ext> {
  return (await client.chat.completions.create({
    model: "tiny",
    messages: user,
    max_tokens: 12,
    seed: 5,
    ignore_eos: true,
    logprobs: true,
    top_logprobs: 20,
    ...extra,
  } as never)) as OpenAI.ChatCompletion & Ext;
}

type Entry = { logprob: number; sampling_logprob: number; top_logprobs: Array<{ logprob: number }> };
const entries = (res: Ext): Entry[] => res.choices[0].logprobs.content;
const logSumExp = (xs: number[]) => Math.log(xs.reduce((a, x) => a + Math.exp(x), 0));

describe("sampling parameters over HTTP", () => {
  it("top_k restricts draws to the k most likely tokens and renormalises over them", async () => {
    const free = entries(await chat({}));
    // Sanity: unrestricted sampling draws outside the top 2 and samples from the full distribution.
    expect(free.some((e) => e.logprob < (e.top_logprobs[1]?.logprob ?? 0) - 1e-6)).toBe(true);
    for (const e of free) expect(e.sampling_logprob).toBeCloseTo(e.logprob, 4);

    const topK = entries(await chat({ top_k: 2 }));
    expect(topK).toHaveLength(12);
    for (const e of topK) {
      const kept = e.top_logprobs.slice(0, 2).map((t) => t.logprob);
      expect(e.logprob).toBeGreaterThanOrEqual((kept[1] as number) - 1e-6);
      expect(e.sampling_logprob).toBeCloseTo(e.logprob - logSumExp(kept), 4);
    }
  });

  it("top_p keeps the smallest nucleus reaching p", async () => {
    const topP = entries(await chat({ top_p: 0.1 }));
    for (const e of topP) {
      const lps = e.top_logprobs.map((t) => t.logprob);
      let mass = 0;
      let keep = 0;
      while (mass < 0.1 && keep < lps.length) mass += Math.exp(lps[keep++] as number);
      expect(mass).toBeGreaterThanOrEqual(0.1); // the 20 reported alternatives cover the nucleus
      expect(keep).toBeGreaterThan(1);
      expect(e.logprob).toBeGreaterThanOrEqual((lps[keep - 1] as number) - 1e-6);
      expect(e.sampling_logprob).toBeCloseTo(e.logprob - logSumExp(lps.slice(0, keep)), 4);
    }
  });

  it("stop strings end the reply before the stop text with finish_reason stop; max_tokens gives length", async () => {
    const full = await chat({ max_tokens: 30 });
    const text = full.choices[0]!.message.content ?? "";
    expect(full.choices[0]!.finish_reason).toBe("length");
    expect(text.length).toBeGreaterThan(10);
    const stop = text.slice(6, 8);
    const cut = text.indexOf(stop);
    const stopped = await chat({ max_tokens: 30, stop: ["\u0001never", stop] });
    expect(stopped.choices[0]!.message.content).toBe(text.slice(0, cut));
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    // Same seed, same draws: the reply is the prefix of the unstopped one, ids included.
    const full2: Ext = await chat({ max_tokens: 30, return_token_ids: true });
    const stopped2: Ext = await chat({ max_tokens: 30, stop, return_token_ids: true });
    const ids: number[] = stopped2.choices[0].token_ids;
    expect(ids.length).toBeLessThan(30);
    expect(full2.choices[0].token_ids.slice(0, ids.length)).toEqual(ids);
    // The ids keep the stop text (as vLLM's do), up to the token that completed it (which may run past the
    // stop text when it is a multi-character token such as <tool_call>); the content does not.
    const kept = s.tokenizer.decode(ids, { skipSpecialTokens: true });
    expect(kept.startsWith(text.slice(0, cut + stop.length))).toBe(true);
    expect(s.tokenizer.decode(ids.slice(0, -1), { skipSpecialTokens: true }).length).toBeLessThan(
      cut + stop.length,
    );
  });
});

describe("limits and truncation over HTTP", () => {
  it("/v1/completions answers a prompt that leaves no room with a 400 context_length_exceeded", async () => {
    const bad = async (prompt: unknown) => {
      try {
        await client.completions.create({ model: "tiny", prompt: prompt as never, max_tokens: 4 });
      } catch (error) {
        return error as InstanceType<typeof OpenAI.APIError>;
      }
      throw new Error("expected an error");
    };
    for (const prompt of ["x".repeat(CTX), "x".repeat(CTX + 50), new Array<number>(CTX).fill(20)]) {
      const e = await bad(prompt);
      expect(e.status).toBe(400);
      expect(e.code).toBe("context_length_exceeded");
      expect(e.param).toBe("prompt");
      expect(e.message).toContain(`maximum context length is ${CTX} tokens`);
    }
    // One token of room is enough, and the reply is cut there.
    const ok = await client.completions.create({
      model: "tiny",
      prompt: "x".repeat(CTX - 1),
      max_tokens: 4,
      ignore_eos: true,
    } as never);
    expect(ok.choices[0]!.finish_reason).toBe("length");
    expect(ok.usage?.completion_tokens).toBe(1);
  });

  it("a generation cut off by the request deadline reports abort (and a timeout error), never stop", async () => {
    const slow = new PolicyServer({
      model: s.model,
      tokenizer: s.tokenizer,
      template: s.template,
      modelName: "tiny",
      requestTimeoutMs: 50,
    });
    await slow.start();
    try {
      // Paused: requests wait in the queue until the deadline aborts them.
      await slow.pause();
      const sdk = new OpenAI({ baseURL: slow.baseUrl, apiKey: "none", maxRetries: 0 });
      const finishes: Array<string | null> = [];
      const stream = await sdk.chat.completions.create({ model: "tiny", messages: user, stream: true });
      const failure = await (async () => {
        try {
          for await (const chunk of stream) for (const c of chunk.choices) finishes.push(c.finish_reason);
        } catch (error) {
          return error as InstanceType<typeof OpenAI.APIError>;
        }
        return undefined;
      })();
      expect(finishes).toEqual(["abort"]);
      expect(failure?.message).toMatch(/Generation timed out/);

      const res = await fetch(`${slow.baseUrl}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "tiny", prompt: "a", max_tokens: 5, stream: true }),
      });
      const events = (await res.text())
        .split("\n")
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6));
      expect(events.at(-1)).toBe("[DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as Ext);
      expect(chunks.flatMap((c) => (c.choices ?? []).map((x: Ext) => x.finish_reason))).toEqual(["abort"]);
      expect(chunks.at(-1)?.error?.code).toBe("timeout");
      slow.resume();
    } finally {
      await slow.stop();
    }
  });

  it("maps the generator's finish reasons without claiming a normal stop for aborted output", () => {
    const template = new ChatTemplate(new Tokenizer());
    const result = (finishReason: GenerateResult["finishReason"], text: string): GenerateResult => ({
      promptIds: [1],
      tokenIds: [],
      tokens: [],
      text,
      finishReason,
      modelVersion: 0,
    });
    expect(completionFinishReason(result("stop", "a"))).toBe("stop");
    expect(completionFinishReason(result("length", "a"))).toBe("length");
    expect(completionFinishReason(result("abort", "a"))).toBe("abort");
    const call = '<tool_call>{"name":"f","arguments":{}}</tool_call>';
    expect(assistantMessage(result("stop", call), true, template).finishReason).toBe("tool_calls");
    expect(assistantMessage(result("abort", call), true, template).finishReason).toBe("abort");
    expect(assistantMessage(result("abort", "par"), true, template)).toEqual({
      message: { role: "assistant", content: "par" },
      finishReason: "abort",
    });
    expect(assistantMessage(result("length", "par"), false, template).finishReason).toBe("length");
  });
});
