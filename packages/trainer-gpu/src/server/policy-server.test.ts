import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CALC_TOOL, toolCallingModel } from "../test-support/tiny.js";
import type { ChatMessage } from "../tokenizer/messages.js";
import { PolicyServer } from "./policy-server.js";

type Setup = Awaited<ReturnType<typeof toolCallingModel>>;
let s: Setup;
let server: PolicyServer;
let client: OpenAI;
const API_KEY = "test-secret";

// vLLM extension fields are not in the SDK's types.
type Ext = Record<string, any>;

function forwardLogprobs(promptIds: number[], tokenIds: number[]): number[] {
  const all = tf.tidy(() => s.model.tokenLogProbs([[...promptIds, ...tokenIds]]).arraySync()[0]!);
  return all.slice(promptIds.length - 1);
}

const question: ChatMessage[] = [{ role: "user", content: "2+3?" }];
const tools = [CALC_TOOL] as OpenAI.ChatCompletionTool[];

beforeAll(async () => {
  s = await toolCallingModel();
  server = new PolicyServer({
    model: s.model,
    tokenizer: s.tokenizer,
    template: s.template,
    apiKey: API_KEY,
    modelName: "tiny",
  });
  await server.start();
  client = new OpenAI({ baseURL: server.baseUrl, apiKey: API_KEY, maxRetries: 0 });
});

afterAll(async () => {
  await server?.stop();
  s?.model.dispose();
});

describe("PolicyServer with the openai SDK", () => {
  it("returns a tool call whose ids, logprobs and template round-trip exactly", async () => {
    const res = (await client.chat.completions.create({
      model: "tiny",
      messages: question as OpenAI.ChatCompletionMessageParam[],
      tools,
      temperature: 0,
      logprobs: true,
      top_logprobs: 2,
      return_token_ids: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)) as OpenAI.ChatCompletion & Ext;
    const choice = res.choices[0]! as OpenAI.ChatCompletion.Choice & Ext;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("calc");
    expect(JSON.parse(call.function.arguments)).toEqual({ expr: "2+3" });

    const promptIds: number[] = res.prompt_token_ids;
    const tokenIds: number[] = choice.token_ids;
    expect(promptIds).toEqual(s.template.encodeChat(question, [CALC_TOOL]).ids);
    expect(tokenIds.at(-1)).toBe(s.tokenizer.eosId);
    expect(s.tokenizer.decode(tokenIds, { skipSpecialTokens: true })).toBe(
      `<tool_call>{"name":"calc","arguments":{"expr":"2+3"}}</tool_call>`,
    );

    const content = choice.logprobs!.content!;
    expect(content.map((c: Ext) => c.token)).toEqual(tokenIds.map((id) => s.tokenizer.tokenText(id)));
    const expected = forwardLogprobs(promptIds, tokenIds);
    for (const [i, c] of content.entries()) expect(Math.abs(c.logprob - expected[i]!)).toBeLessThan(1e-4);
    expect(content[0]!.top_logprobs).toHaveLength(2);

    // Feeding the reply back re-renders to exactly prompt + generated ids (no retokenization drift).
    const followUp = s.template.encodeChat(
      [...question, choice.message as ChatMessage, { role: "tool", tool_call_id: call.id, content: "5" }],
      [CALC_TOOL],
    ).ids;
    expect(followUp.slice(0, promptIds.length + tokenIds.length)).toEqual([...promptIds, ...tokenIds]);
    expect(res.system_fingerprint).toBe(`agl-policy-v${server.version}`);
    expect(res.usage?.completion_tokens).toBe(tokenIds.length);
  });

  it("streams a tool call as delta.tool_calls, with the raw call in token_ids", async () => {
    const stream = await client.chat.completions.create({
      model: "tiny",
      messages: question as OpenAI.ChatCompletionMessageParam[],
      tools,
      temperature: 0,
      stream: true,
      return_token_ids: true,
    } as never);
    let content = "";
    const ids: number[] = [];
    const calls: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    let finish: string | null = null;
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & Ext>) {
      for (const c of chunk.choices as Array<OpenAI.ChatCompletionChunk.Choice & Ext>) {
        content += c.delta.content ?? "";
        ids.push(...(c.token_ids ?? []));
        calls.push(...(c.delta.tool_calls ?? []));
        finish = c.finish_reason ?? finish;
      }
    }
    expect(content).toBe("");
    expect(finish).toBe("tool_calls");
    expect(calls).toHaveLength(1);
    expect(calls[0]!.function).toEqual({ name: "calc", arguments: '{"expr":"2+3"}' });
    expect(s.tokenizer.decode(ids, { skipSpecialTokens: true })).toBe(
      `<tool_call>{"name":"calc","arguments":{"expr":"2+3"}}</tool_call>`,
    );
  });

  it("streams n=2 choices with the same ids and text as the non-streaming call", async () => {
    const params = {
      model: "tiny",
      messages: [
        ...question,
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "calc", arguments: '{"expr":"2+3"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "5" },
      ],
      tools,
      n: 2,
      seed: 42,
      temperature: 1,
      max_tokens: 20,
      logprobs: true,
      return_token_ids: true,
    } as Ext;
    const whole = (await client.chat.completions.create({
      ...params,
      stream: false,
    } as never)) as OpenAI.ChatCompletion & Ext;
    const stream = await client.chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: true },
    } as never);
    const got = [0, 1].map(() => ({
      content: "",
      ids: [] as number[],
      logprobs: [] as number[],
      finish: "" as string | null,
      tools: [] as unknown[],
    }));
    let promptIds: number[] | undefined;
    let usage: unknown;
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.ChatCompletionChunk & Ext>) {
      if (chunk.prompt_token_ids) promptIds = chunk.prompt_token_ids;
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices as Array<OpenAI.ChatCompletionChunk.Choice & Ext>) {
        const g = got[c.index]!;
        g.content += c.delta.content ?? "";
        g.ids.push(...(c.token_ids ?? []));
        for (const lp of c.logprobs?.content ?? []) g.logprobs.push(lp.logprob);
        if (c.delta.tool_calls) g.tools.push(...c.delta.tool_calls);
        if (c.finish_reason) g.finish = c.finish_reason;
      }
    }
    expect(promptIds).toEqual(whole.prompt_token_ids);
    expect(usage).toBeDefined();
    whole.choices.forEach((c, i) => {
      const choice = c as OpenAI.ChatCompletion.Choice & Ext;
      const g = got[i]!;
      expect(g.ids).toEqual(choice.token_ids);
      expect(g.finish).toBe(choice.finish_reason);
      expect(g.content || null).toBe(choice.message.content);
      expect(g.tools.length).toBe(choice.message.tool_calls?.length ?? 0);
      const expected = forwardLogprobs(promptIds!, g.ids);
      for (const [j, lp] of g.logprobs.entries()) expect(Math.abs(lp - expected[j]!)).toBeLessThan(1e-4);
      if (!choice.message.tool_calls) {
        const text = s.tokenizer.decode(g.ids, { skipSpecialTokens: true });
        expect(text).toBe(choice.message.content ?? "");
      }
    });
    // Different seeds per choice: the two samples are not forced to be equal, but both are well-formed.
    expect(got.every((g) => g.ids.length > 0)).toBe(true);
  });

  it("serves completions from text and token-id prompts, streaming and not", async () => {
    const promptIds = s.template.encodeChat(question, [CALC_TOOL]).ids;
    const res = (await client.completions.create({
      model: "tiny",
      prompt: promptIds as never,
      max_tokens: 30,
      temperature: 0,
      logprobs: 1,
      n: 2,
      return_token_ids: true,
    } as never)) as OpenAI.Completion & Ext;
    expect(res.choices).toHaveLength(2);
    for (const c of res.choices as Array<OpenAI.CompletionChoice & Ext>) {
      expect(c.prompt_token_ids).toEqual(promptIds);
      expect(s.tokenizer.decode(c.token_ids, { skipSpecialTokens: true })).toBe(c.text);
      expect(c.text).toContain("<tool_call>");
      const expected = forwardLogprobs(promptIds, c.token_ids);
      for (const [j, lp] of c.logprobs!.token_logprobs!.entries())
        expect(Math.abs(lp - expected[j]!)).toBeLessThan(1e-4);
    }
    const stream = await client.completions.create({
      model: "tiny",
      prompt: "hello",
      max_tokens: 10,
      seed: 3,
      stream: true,
      return_token_ids: true,
    } as never);
    let text = "";
    const ids: number[] = [];
    let sawPrompt = false;
    let finish: string | null = null;
    for await (const chunk of stream as unknown as AsyncIterable<OpenAI.Completion & Ext>) {
      for (const c of chunk.choices as Array<OpenAI.CompletionChoice & Ext>) {
        text += c.text;
        ids.push(...(c.token_ids ?? []));
        if (c.prompt_token_ids) sawPrompt = true;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    expect(sawPrompt).toBe(true);
    expect(finish).not.toBeNull();
    expect(s.tokenizer.decode(ids, { skipSpecialTokens: true })).toBe(text);
    const same = (await client.completions.create({
      model: "tiny",
      prompt: "hello",
      max_tokens: 10,
      seed: 3,
      return_token_ids: true,
    } as never)) as Ext;
    expect(same.choices[0].token_ids).toEqual(ids);
  });

  it("answers bad requests with OpenAI-style errors", async () => {
    const bad = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (error) {
        return error as InstanceType<typeof OpenAI.APIError>;
      }
      throw new Error("expected an error");
    };
    const unknown = await bad(
      client.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }),
    );
    // vLLM's answer for a name it does not serve: 404 naming the field.
    expect(unknown.status).toBe(404);
    expect(unknown.code).toBe("model_not_found");
    expect(unknown.param).toBe("model");
    const tooLong = await bad(
      client.chat.completions.create({
        model: "tiny",
        messages: [{ role: "user", content: "x".repeat(200) }],
      }),
    );
    expect(tooLong.status).toBe(400);
    expect(tooLong.code).toBe("context_length_exceeded");
    const malformed = await bad(
      client.chat.completions.create({ model: "tiny", messages: [{ role: "robot", content: "x" }] as never }),
    );
    expect(malformed.status).toBe(400);
    expect(malformed.param).toContain("messages");
    const badIds = await bad(client.completions.create({ model: "tiny", prompt: [1, 99999] as never }));
    expect(badIds.status).toBe(400);
    const noAuth = new OpenAI({ baseURL: server.baseUrl, apiKey: "wrong", maxRetries: 0 });
    expect((await bad(noAuth.models.list())).status).toBe(401);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual(["tiny"]);
    const health = await fetch(`${server.url}/health`);
    expect(((await health.json()) as Ext).status).toBe("ok");
  });

  it("swaps weights between steps without dropping in-flight requests", async () => {
    const v0 = server.version;
    const inflight = client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "go" }],
      max_tokens: 40,
      seed: 1,
      ignore_eos: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    // Swap only once that request is running, so it is the one the swap must drain.
    const deadline = Date.now() + 5000;
    while (server.generator.activeCount === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 1));
    const copy = s.model.clone();
    const swapped = server.swapWeights(copy);
    const queued = client.chat.completions.create({
      model: "tiny",
      messages: [{ role: "user", content: "go" }],
      max_tokens: 5,
      seed: 1,
    });
    const [a, version, b] = await Promise.all([inflight, swapped, queued]);
    expect(version).toBe(v0 + 1);
    expect(a.usage?.completion_tokens).toBe(40);
    expect(a.system_fingerprint).toBe(`agl-policy-v${v0}`);
    expect(b.system_fingerprint).toBe(`agl-policy-v${v0 + 1}`);
    copy.dispose();
  });
});

describe("PolicyServer limits", () => {
  it("enforces the body limit, the request deadline, and stops generating for a vanished client", async () => {
    const small = new PolicyServer({
      model: s.model,
      tokenizer: s.tokenizer,
      bodyLimitBytes: 2000,
      requestTimeoutMs: 30,
    });
    await small.start();
    try {
      const big = await fetch(`${small.baseUrl}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "agl-policy",
          messages: [{ role: "user", content: "x".repeat(5000) }],
        }),
      });
      expect(big.status).toBe(413);
      expect(((await big.json()) as Ext).error.message).toMatch(/too large/);
      // Paused: the request waits in the queue until its 30 ms deadline aborts it.
      await small.pause();
      const slow = await fetch(`${small.baseUrl}/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "agl-policy", prompt: "a", max_tokens: 5 }),
      });
      expect(slow.status).toBe(504);
      expect(((await slow.json()) as Ext).error.code).toBe("timeout");
      expect(small.generator.queuedCount).toBe(0);
      small.resume();
    } finally {
      await small.stop();
    }
    const ctrl = new AbortController();
    const res = await fetch(`${server.baseUrl}/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ model: "tiny", prompt: "a", max_tokens: 127, ignore_eos: true, stream: true }),
      signal: ctrl.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    const stepsAtAbort = server.generator.steps;
    ctrl.abort();
    const deadline = Date.now() + 2000;
    while (server.generator.activeCount > 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10));
    expect(server.generator.activeCount).toBe(0);
    // 127 tokens were asked for; the sequence was dropped long before.
    expect(server.generator.steps - stepsAtAbort).toBeLessThan(100);
  });
});
