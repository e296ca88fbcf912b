import { basename, dirname } from "node:path";
import { AutoTokenizer, env } from "@huggingface/transformers";
import * as tf from "@tensorflow/tfjs";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hfToolCallingModel } from "../test-support/hf-tiny.js";
import { CALC_TOOL } from "../test-support/tiny.js";
import { templateMessages } from "../tokenizer/hf-chat-template.js";
import type { ChatMessage } from "../tokenizer/messages.js";
import { PolicyServer } from "./policy-server.js";

/** PolicyServer behind a checkpoint tokenizer (byte-level BPE + the Qwen3 chat template and hermes tool calls). */

type Setup = Awaited<ReturnType<typeof hfToolCallingModel>>;
type Ext = Record<string, any>;
let s: Setup;
let server: PolicyServer;
let client: OpenAI;
const MODEL = "tiny-qwen3";
const question: ChatMessage[] = [{ role: "user", content: "2+3?" }];
const tools = [CALC_TOOL] as OpenAI.ChatCompletionTool[];
const CALL_TEXT = '<tool_call>\n{"name": "calc", "arguments": {"expr": "2+3"}}\n</tool_call>';

beforeAll(async () => {
  s = await hfToolCallingModel();
  server = new PolicyServer({
    model: s.model,
    tokenizer: s.tokenizer,
    template: s.template,
    modelName: MODEL,
  });
  await server.start();
  client = new OpenAI({ baseURL: server.baseUrl, apiKey: "unused", maxRetries: 0 });
});

afterAll(async () => {
  await server?.stop();
  s?.model.dispose();
});

describe("PolicyServer serving a checkpoint tokenizer", () => {
  it("prompts are apply_chat_template's ids; the reply is a hermes tool call ending on the checkpoint's eos", async () => {
    const res = (await client.chat.completions.create({
      model: MODEL,
      messages: question as OpenAI.ChatCompletionMessageParam[],
      tools,
      temperature: 0,
      logprobs: true,
      return_token_ids: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming)) as OpenAI.ChatCompletion & Ext;
    expect(res.model).toBe(MODEL);
    const choice = res.choices[0] as OpenAI.ChatCompletion.Choice & Ext;
    expect(choice.finish_reason).toBe("tool_calls");
    const call = choice.message.tool_calls?.[0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function).toEqual({ name: "calc", arguments: '{"expr": "2+3"}' });
    expect(choice.message.content).toBe("<think>\n\n</think>\n\n");

    env.allowRemoteModels = false;
    env.localModelPath = `${dirname(s.dir)}/`;
    const ref = await AutoTokenizer.from_pretrained(basename(s.dir));
    const refIds = ref.apply_chat_template(templateMessages(question) as never, {
      tools: [CALC_TOOL],
      add_generation_prompt: true,
      return_tensor: false,
      return_dict: false,
    });
    expect(res.prompt_token_ids).toEqual(refIds);

    const tokenIds: number[] = choice.token_ids;
    expect(s.tokenizer.eosIds).toContain(tokenIds.at(-1));
    expect(s.tokenizer.decode(tokenIds)).toBe(`<think>\n\n</think>\n\n${CALL_TEXT}<|im_end|>`);
    const lp = choice.logprobs?.content as Array<{ token: string; logprob: number }>;
    expect(lp.map((c) => c.token).join("")).toBe(s.tokenizer.decode(tokenIds));
    const forward = tf.tidy(
      () => s.model.tokenLogProbs([[...res.prompt_token_ids, ...tokenIds]]).arraySync()[0] as number[],
    );
    const expected = forward.slice(res.prompt_token_ids.length - 1);
    for (const [i, c] of lp.entries())
      expect(Math.abs(c.logprob - (expected[i] as number))).toBeLessThan(1e-4);
  });

  it("streams the same reply: content before the call, then delta.tool_calls", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
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
    expect(content).toBe("<think>\n\n</think>\n\n");
    expect(finish).toBe("tool_calls");
    expect(calls.map((c) => c.function)).toEqual([{ name: "calc", arguments: '{"expr": "2+3"}' }]);
    expect(s.tokenizer.decode(ids, { skipSpecialTokens: true })).toBe(`<think>\n\n</think>\n\n${CALL_TEXT}`);
  });

  it("completions tokenize a text prompt with the checkpoint tokenizer (special-token strings become tokens)", async () => {
    const prompt = "<|im_start|>user\n2+3?<|im_end|>\n<|im_start|>assistant\n";
    const res = (await client.completions.create({
      model: MODEL,
      prompt,
      max_tokens: 5,
      temperature: 0,
      return_token_ids: true,
    } as never)) as OpenAI.Completion & Ext;
    const choice = res.choices[0] as OpenAI.CompletionChoice & Ext;
    expect(choice.prompt_token_ids).toEqual(s.tokenizer.encode(prompt));
    expect(choice.prompt_token_ids[0]).toBe(s.tokenizer.tokenToId("<|im_start|>"));
    expect(s.tokenizer.decode(choice.token_ids, { skipSpecialTokens: true })).toBe(choice.text);
  });

  it("lists the checkpoint's model name and rejects other names", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    await expect(
      client.chat.completions.create({ model: "other", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 404, param: "model" });
  });
});
