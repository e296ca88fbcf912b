import { mockDecode, mockEncode } from "@agl/core/mock-llm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const tools = [
  {
    type: "function" as const,
    name: "calculator",
    description: "evaluate an arithmetic expression",
    parameters: { type: "object", properties: { expr: { type: "string" } }, required: ["expr"] },
    strict: false,
  },
];

/** The mock model: calls the calculator until it sees a tool result, then answers with it. */
function respond(req: { body: any }) {
  const messages: any[] = req.body.messages ?? [];
  const toolResult = messages.findLast((m) => m.role === "tool");
  if (req.body.tools && !toolResult) {
    return { content: null, tool_calls: [{ name: "calculator", arguments: '{"expr":"2+2"}' }] };
  }
  return {
    content: toolResult ? `The answer is ${toolResult.content}.` : `Echo: ${messages.at(-1)?.content}`,
  };
}

describe("/v1/responses served over the upstream's chat/completions (real openai SDK)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ mocks: [{ respond }] });
  });
  afterAll(() => h.close());

  /** Each span's prompt ids are the mock's encoding of what went upstream; response ids of its answer. */
  function expectExactIds(span: any, upstreamBody: any) {
    const a = span.attributes;
    expect(a.prompt_token_ids).toEqual(mockEncode(JSON.stringify(upstreamBody.messages)));
    expect(a["agl.proxy.client_api"]).toBe("responses");
    expect(a["agl.proxy.token_ids_missing"]).toBe(false);
    expect(a["agl.response_logprobs"]).toHaveLength(a.response_token_ids.length);
    return a;
  }

  for (const stream of [false, true]) {
    it(`multi-turn with a function tool, ${stream ? "streamed" : "non-streamed"}: one chat span per call, exact ids`, async () => {
      const { rolloutId, attemptId } = await h.newAttempt();
      const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      const tap = h.taps[0]!.exchanges;
      const before = tap.length;
      const input: any[] = [{ role: "user", content: "what is 2+2?" }];
      let first: any;
      if (stream) {
        const s = client.responses.stream({ model: "m", instructions: "be brief", input, tools });
        const types: string[] = [];
        for await (const e of s) types.push(e.type);
        first = await s.finalResponse();
        expect(types[0]).toBe("response.created");
        expect(types).toContain("response.function_call_arguments.delta");
        expect(types.at(-1)).toBe("response.completed");
      } else {
        first = await client.responses.create({ model: "m", instructions: "be brief", input, tools });
      }
      expect(first.status).toBe("completed");
      const call = first.output.find((o: any) => o.type === "function_call");
      expect(call).toMatchObject({ name: "calculator", arguments: '{"expr":"2+2"}' });
      // the second turn sends the whole conversation back, as @openai/agents does
      input.push(...first.output, { type: "function_call_output", call_id: call.call_id, output: "4" });
      const secondParams = { model: "m", instructions: "be brief", input, tools };
      let second: any;
      if (stream) {
        const s = client.responses.stream(secondParams);
        let text = "";
        for await (const e of s) if (e.type === "response.output_text.delta") text += e.delta;
        second = await s.finalResponse();
        expect(text).toBe("The answer is 4.");
      } else {
        second = await client.responses.create(secondParams);
      }
      expect(second.output_text).toBe("The answer is 4.");
      expect(second.usage.output_tokens).toBe(mockEncode("The answer is 4.").length);

      const sent = tap.slice(before).map((e) => JSON.parse(e.requestBody));
      expect(sent.map(() => tap[before]!.path)).toEqual(["/v1/chat/completions", "/v1/chat/completions"]);
      expect(sent[1].messages).toEqual([
        { role: "system", content: "be brief" },
        { role: "user", content: "what is 2+2?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: call.call_id,
              type: "function",
              function: { name: "calculator", arguments: '{"expr":"2+2"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: call.call_id, content: "4" },
      ]);
      expect(sent[1].tools[0]).toEqual({
        type: "function",
        function: {
          name: "calculator",
          description: tools[0]!.description,
          parameters: tools[0]!.parameters,
          strict: false,
        },
      });
      expect(sent[0]).toMatchObject({
        return_token_ids: true,
        logprobs: true,
        ...(stream ? { stream: true } : {}),
      });

      const spans = (await h.spans(rolloutId)).sort((x, y) => x.sequence_id - y.sequence_id);
      expect(spans.map((s) => s.name)).toEqual(["openai.chat.completion", "openai.chat.completion"]);
      const a0 = expectExactIds(spans[0], sent[0]);
      expect(mockDecode(a0.response_token_ids)).toContain("calculator");
      const a1 = expectExactIds(spans[1], sent[1]);
      expect(mockDecode(a1.response_token_ids)).toBe("The answer is 4.");
      expect(a1["agl.proxy.stream"]).toBe(stream);
    });
  }

  it("previous_response_id continues the attempt's conversation; another attempt or store:false gets a 400", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    const first = await client.responses.create({ model: "m", input: "hello", instructions: "sys" });
    expect(first.output_text).toBe("Echo: hello");
    const before = h.taps[0]!.exchanges.length;
    const second = await client.responses.create({
      model: "m",
      input: "again",
      previous_response_id: first.id,
      instructions: "sys2",
    });
    expect(second.previous_response_id).toBe(first.id);
    expect(JSON.parse(h.taps[0]!.exchanges[before]!.requestBody).messages).toEqual([
      { role: "system", content: "sys2" },
      { role: "user", content: "hello" },
      { role: "assistant", content: "Echo: hello" },
      { role: "user", content: "again" },
    ]);
    const other = await h.newAttempt();
    const otherClient = h.client(`${h.url}/rollout/${other.rolloutId}/attempt/${other.attemptId}/v1`);
    await expect(
      otherClient.responses.create({ model: "m", input: "x", previous_response_id: first.id }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("previous_response_id") });
    const unstored = await client.responses.create({ model: "m", input: "x", store: false });
    await expect(
      client.responses.create({ model: "m", input: "y", previous_response_id: unstored.id }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it("item_reference inputs resolve to the attempt's stored output items (as the AI SDK sends with store)", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    const first = await client.responses.create({ model: "m", input: "hello" });
    const before = h.taps[0]!.exchanges.length;
    await client.responses.create({
      model: "m",
      input: [
        { role: "user", content: "hello" },
        { type: "item_reference", id: first.output[0]!.id! } as any,
        { role: "user", content: "more" },
      ],
    });
    expect(JSON.parse(h.taps[0]!.exchanges[before]!.requestBody).messages).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: "Echo: hello" },
      { role: "user", content: "more" },
    ]);
    await expect(
      client.responses.create({ model: "m", input: [{ type: "item_reference", id: "msg_unknown" } as any] }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("input.0.id") });
  });

  it("rejects what an open model cannot serve with a 400 naming the field, before any upstream call", async () => {
    const { rolloutId, attemptId } = await h.newAttempt();
    const client = h.client(`${h.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
    const before = h.taps[0]!.exchanges.length;
    await expect(
      client.responses.create({ model: "m", input: "x", tools: [{ type: "web_search" } as any] }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("tools.0.type") });
    await expect(
      client.responses.create({ model: "m", input: [{ type: "function_call", name: "f" } as any] }),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("input.0.call_id") });
    await expect(client.responses.create({ model: "m" } as any)).rejects.toMatchObject({
      status: 400,
      message: expect.stringContaining("input"),
    });
    expect(h.taps[0]!.exchanges.length).toBe(before);
    expect(await h.spans(rolloutId)).toHaveLength(0);
  });

  it("an upstream dying mid-stream ends the client's stream with an error and records a partial span", async () => {
    const dying = await startHarness({
      mocks: [{ dieAfterChunks: 3, chunkDelayMs: 10 }],
      proxy: { retries: 0 },
    });
    try {
      const { rolloutId, attemptId } = await dying.newAttempt();
      const client = dying.client(`${dying.url}/rollout/${rolloutId}/attempt/${attemptId}/v1`);
      const s = client.responses.stream({ model: "m", input: "a long question to echo back" });
      await expect(
        (async () => {
          for await (const _ of s);
        })(),
      ).rejects.toThrow();
      const [span] = await dying.spans(rolloutId);
      expect(span!.attributes["agl.proxy.partial"]).toBe(true);
      expect(span!.attributes["agl.proxy.status"]).toBe("error");
    } finally {
      await dying.close();
    }
  });
});
