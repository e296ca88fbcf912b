import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { selectBackend } from "../backend/select.js";
import type { CausalLM } from "../model/causal-lm.js";
import { loadPretrainedPolicy, type PretrainedPolicy } from "../pretrained/load-policy.js";
import { hfToolCallingModel } from "../test-support/hf-tiny.js";
import { CALC_TOOL } from "../test-support/tiny.js";
import { writeTinyPretrainedCheckpoint } from "../test-support/tiny-pretrained.js";
import type { HfTokenizer } from "../tokenizer/hf-tokenizer.js";
import { PolicyServer } from "./policy-server.js";
import { forcedToolCalls } from "./tool-choice.js";

/**
 * `tool_choice` enforced as vLLM does, through the openai SDK: "required" and a named function always
 * reply with tool calls (the call's opening is forced, the model picks the tool and writes the arguments),
 * "none" renders the tools but never parses calls out of the reply.
 */

type Ext = Record<string, any>;
type Entry = { token: string; logprob: number; sampling_logprob: number; forced?: boolean };
const ECHO_TOOL = {
  type: "function" as const,
  function: {
    name: "echo",
    description: "Repeat a text",
    parameters: { type: "object", properties: { text: { type: "string" } } },
  },
};
const TOOLS = [CALC_TOOL, ECHO_TOOL] as OpenAI.ChatCompletionTool[];
const question = [{ role: "user" as const, content: "2+3?" }];
/**
 * How the checkpoint's Qwen3 template renders the opening of a call in a conversation that goes on with
 * its result: no empty `<think>` block, which Qwen3 writes only before the final assistant turn.
 */
const opening = (name: string) => `<tool_call>\n{"name": "${name}", "arguments":`;

async function serve(model: CausalLM, policy: { tokenizer: HfTokenizer; template: never }, name: string) {
  const server = new PolicyServer({
    model,
    tokenizer: policy.tokenizer,
    template: policy.template,
    modelName: name,
  });
  await server.start();
  return { server, client: new OpenAI({ baseURL: server.baseUrl, apiKey: "unused", maxRetries: 0 }) };
}

function rawLogprobs(model: CausalLM, promptIds: number[], ids: number[]): number[] {
  const all = tf.tidy(() => model.tokenLogProbs([[...promptIds, ...ids]]).arraySync()[0] as number[]);
  return all.slice(promptIds.length - 1);
}

describe("tool_choice on a random Hugging Face checkpoint (it never writes a call by itself)", {
  timeout: 180_000,
}, () => {
  let dir: string;
  let policy: PretrainedPolicy;
  let server: PolicyServer;
  let client: OpenAI;
  beforeAll(async () => {
    await selectBackend({ log: () => {} });
    dir = await writeTinyPretrainedCheckpoint({ seed: 5 });
    policy = await loadPretrainedPolicy(dir);
    ({ server, client } = await serve(policy.model, policy as never, "tiny-random"));
  });
  afterAll(async () => {
    await server?.stop();
    policy?.model.dispose();
    if (dir) await rm(dirname(dir), { recursive: true, force: true });
  });

  const create = (body: Record<string, unknown>) =>
    client.chat.completions.create({
      model: "tiny-random",
      messages: question,
      tools: TOOLS,
      max_tokens: 48,
      logprobs: true,
      return_token_ids: true,
      ...body,
    } as never) as unknown as Promise<OpenAI.ChatCompletion & Ext>;

  it('"auto" (today\'s behaviour): the random model answers in text', async () => {
    const res = await create({ temperature: 0 });
    expect(res.choices[0]?.message.tool_calls ?? []).toEqual([]);
  });

  it('"required": every choice is a call to one of the tools; the model chose the tool, forced ids say so', async () => {
    const res = await create({ tool_choice: "required", temperature: 1, top_p: 1, seed: 11, n: 3 });
    for (const choice of res.choices as Array<OpenAI.ChatCompletion.Choice & Ext>) {
      const calls = choice.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(calls.length).toBeGreaterThanOrEqual(1);
      const name = calls[0]?.function.name as string;
      expect(["calc", "echo"]).toContain(name);
      expect(["tool_calls", "length"]).toContain(choice.finish_reason);
      const ids: number[] = choice.token_ids;
      const text = policy.tokenizer.decode(ids, { skipSpecialTokens: false });
      expect(text.startsWith(opening(name))).toBe(true);
      // Logprobs are the model's raw ones for every token, forced or sampled.
      const entries = choice.logprobs?.content as unknown as Entry[];
      const raw = rawLogprobs(policy.model, res.prompt_token_ids, ids);
      for (const [i, e] of entries.entries())
        expect(Math.abs(e.logprob - (raw[i] as number))).toBeLessThan(1e-4);
      // Forced tokens carry forced: true and sampling_logprob 0; exactly one token of the opening (where
      // "calc" and "echo" part) was the model's choice among the two names.
      // The opening runs from the first token through `"arguments":` (at a token boundary of the rendered
      // call); nothing after it is forced.
      const forcedLen = entries.findLastIndex((e) => e.forced) + 1;
      const openingText = policy.tokenizer.decode(ids.slice(0, forcedLen), { skipSpecialTokens: false });
      expect(openingText.startsWith(opening(name))).toBe(true);
      expect(openingText).toMatch(/"arguments": ?$/);
      const opened = entries.slice(0, forcedLen);
      expect(opened.filter((e) => e.forced !== true)).toHaveLength(1);
      for (const e of opened.filter((e) => e.forced)) expect(e.sampling_logprob).toBe(0);
      // That token was drawn from the model's distribution restricted to the two names' tokens.
      const d = opened.findIndex((e) => e.forced !== true);
      const other = policy.tokenizer.encode(opening(name === "calc" ? "echo" : "calc"))[d] as number;
      expect(other).not.toBe(ids[d]);
      const alt = rawLogprobs(policy.model, res.prompt_token_ids, [...ids.slice(0, d), other])[d] as number;
      const own = raw[d] as number;
      const expected = own - Math.log(Math.exp(own) + Math.exp(alt));
      expect(Math.abs((opened[d] as Entry).sampling_logprob - expected)).toBeLessThan(1e-4);
    }
  });

  it("the forced opening is token for token how a call turn renders in a training transcript", () => {
    for (const history of [
      question,
      [
        ...question,
        {
          role: "assistant" as const,
          content: null,
          tool_calls: [
            { id: "c1", type: "function" as const, function: { name: "calc", arguments: '{"a":2}' } },
          ],
        },
        { role: "tool" as const, tool_call_id: "c1", content: "5" },
      ],
    ]) {
      const tools = TOOLS as never;
      const template = policy.template as unknown as Parameters<typeof forcedToolCalls>[0];
      const promptIds = template.encodeChat(history as never, tools).ids;
      const [forced] = forcedToolCalls(template, history as never, tools, promptIds, ["echo"]);
      // A transcript that calls echo and then answers: the call turn is not the last one.
      const call = {
        id: "c9",
        type: "function" as const,
        function: { name: "echo", arguments: '{"text":"x"}' },
      };
      const transcript = [
        ...history,
        { role: "assistant" as const, content: null, tool_calls: [call] },
        { role: "tool" as const, tool_call_id: "c9", content: "x" },
        { role: "assistant" as const, content: "x" },
      ];
      const { ids } = template.encodeChat(transcript as never, tools, { addGenerationPrompt: false });
      expect(ids.slice(0, promptIds.length)).toEqual(promptIds);
      expect(forced?.ids).toEqual(ids.slice(promptIds.length, promptIds.length + (forced?.ids.length ?? 0)));
      expect(policy.tokenizer.decode(forced?.ids ?? [], { skipSpecialTokens: false })).toMatch(
        /^<tool_call>/,
      );
    }
  });

  it("a named function: the call is to that tool, its whole opening forced", async () => {
    const res = await create({
      tool_choice: { type: "function", function: { name: "echo" } },
      temperature: 0.7,
      seed: 3,
    });
    const choice = res.choices[0] as OpenAI.ChatCompletion.Choice & Ext;
    const call = choice.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("echo");
    expect(call.id).toMatch(/^call_/);
    const entries = choice.logprobs?.content as unknown as Entry[];
    const n = entries.findIndex((e) => e.forced !== true);
    expect(entries.slice(0, n).every((e) => e.sampling_logprob === 0)).toBe(true);
    const openingText = policy.tokenizer.decode(choice.token_ids.slice(0, n), { skipSpecialTokens: false });
    expect(openingText.startsWith(opening("echo"))).toBe(true);
    expect(openingText).toMatch(/"arguments": ?$/);
  });

  it("streaming a forced call delivers delta.tool_calls", async () => {
    const stream = (await client.chat.completions.create({
      model: "tiny-random",
      messages: question,
      tools: TOOLS,
      tool_choice: { type: "function", function: { name: "calc" } },
      max_tokens: 40,
      stream: true,
    } as never)) as unknown as AsyncIterable<OpenAI.ChatCompletionChunk>;
    const calls: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    for await (const chunk of stream)
      for (const c of chunk.choices) calls.push(...(c.delta.tool_calls ?? []));
    expect(calls.map((c) => c.function?.name)).toEqual(["calc"]);
  });

  it("tool_choice without tools, or naming a tool that is not there, is a 400 naming the field", async () => {
    await expect(create({ tools: undefined, tool_choice: "required" })).rejects.toMatchObject({
      status: 400,
      param: "tool_choice",
    });
    await expect(
      create({ tool_choice: { type: "function", function: { name: "nope" } } }),
    ).rejects.toMatchObject({
      status: 400,
      param: "tool_choice.function.name",
    });
  });
});

describe("tool_choice on a model trained to call calc", () => {
  let s: Awaited<ReturnType<typeof hfToolCallingModel>>;
  let server: PolicyServer;
  let client: OpenAI;
  beforeAll(async () => {
    // Trained on the call followed by its result, as real transcripts are: what "required" forces.
    s = await hfToolCallingModel(true);
    ({ server, client } = await serve(s.model, s as never, "tiny-trained"));
  });
  afterAll(async () => {
    await server?.stop();
    s?.model.dispose();
  });

  const create = (body: Record<string, unknown>) =>
    client.chat.completions.create({
      model: "tiny-trained",
      messages: question,
      temperature: 0,
      return_token_ids: true,
      ...body,
    } as never) as unknown as Promise<OpenAI.ChatCompletion & Ext>;

  it('"required" leaves a call the model makes anyway unchanged: same ids, parsed arguments', async () => {
    const auto = await create({ tools: [CALC_TOOL] });
    const required = await create({ tools: [CALC_TOOL], tool_choice: "required" });
    const a = auto.choices[0] as OpenAI.ChatCompletion.Choice & Ext;
    const r = required.choices[0] as OpenAI.ChatCompletion.Choice & Ext;
    expect(r.token_ids).toEqual(a.token_ids);
    expect(r.finish_reason).toBe("tool_calls");
    const call = r.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: "calc", arguments: '{"expr": "2+3"}' });
  });

  it('"none" renders the tools (same prompt as "auto") and returns the reply as content, never as calls', async () => {
    const auto = await create({ tools: [CALC_TOOL] });
    const none = await create({ tools: [CALC_TOOL], tool_choice: "none" });
    expect(none.prompt_token_ids).toEqual(auto.prompt_token_ids);
    const choice = none.choices[0] as OpenAI.ChatCompletion.Choice;
    expect(choice.message.tool_calls ?? []).toEqual([]);
    expect(choice.message.content).toContain('<tool_call>\n{"name": "calc"');
    expect(choice.finish_reason).toBe("stop");
  });
});
