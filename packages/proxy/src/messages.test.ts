import { mockDecode, mockEncode } from "@agl/core/mock-llm";
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Harness, startHarness } from "./test-support/harness.js";

const ADMIN = "admin-token-for-tests";

const tools = [
  {
    name: "calculator",
    description: "evaluate an arithmetic expression",
    input_schema: { type: "object" as const, properties: { expr: { type: "string" } }, required: ["expr"] },
  },
];

function respond(req: { body: any }) {
  const messages: any[] = req.body.messages ?? [];
  const toolResult = messages.findLast((m) => m.role === "tool");
  if (req.body.tools && !toolResult) {
    return { content: "Let me compute.", tool_calls: [{ name: "calculator", arguments: '{"expr":"6*7"}' }] };
  }
  if (req.body.max_tokens === 3) return { content: "cut", finish_reason: "length" };
  return { content: toolResult ? `It is ${toolResult.content}.` : `Echo: ${messages.at(-1)?.content}` };
}

describe("/v1/messages (Anthropic Messages) served over chat/completions (real @anthropic-ai/sdk)", () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness({ mocks: [{ respond }], proxy: { adminToken: ADMIN } });
  });
  afterAll(() => h.close());

  /** The SDK with a per-attempt token as its x-api-key and no attribution in the URL: the token names the attempt. */
  async function clientFor() {
    const { rolloutId, attemptId } = await h.newAttempt();
    const apiKey = h.proxy.mintAttemptToken(rolloutId, attemptId);
    return { rolloutId, client: new Anthropic({ baseURL: h.url, apiKey, maxRetries: 0, timeout: 10_000 }) };
  }

  for (const stream of [false, true]) {
    it(`system, tool_use → tool_result round trip, ${stream ? "streamed" : "non-streamed"}: chat spans with exact ids`, async () => {
      const { rolloutId, client } = await clientFor();
      const tap = h.taps[0]!.exchanges;
      const before = tap.length;
      const messages: Anthropic.MessageParam[] = [
        { role: "user", content: [{ type: "text", text: "6 times 7?" }] },
      ];
      const params = { model: "claude-ish", max_tokens: 256, system: "be exact", tools, messages };
      let first: Anthropic.Message;
      if (stream) {
        const s = client.messages.stream(params);
        const types: string[] = [];
        let json = "";
        s.on("streamEvent", (e) => {
          types.push(e.type);
          if (e.type === "content_block_delta" && e.delta.type === "input_json_delta")
            json += e.delta.partial_json;
        });
        first = await s.finalMessage();
        expect(types[0]).toBe("message_start");
        expect(types.at(-1)).toBe("message_stop");
        expect(json).toBe('{"expr":"6*7"}');
      } else {
        first = await client.messages.create(params);
      }
      expect(first.stop_reason).toBe("tool_use");
      expect(first.content[0]).toEqual({ type: "text", text: "Let me compute." });
      const use = first.content[1] as Anthropic.ToolUseBlock;
      expect(use).toMatchObject({ type: "tool_use", name: "calculator", input: { expr: "6*7" } });
      messages.push(
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "42" }] },
      );
      const second = stream
        ? await client.messages.stream({ ...params, messages }).finalMessage()
        : await client.messages.create({ ...params, messages });
      expect(second.content).toEqual([{ type: "text", text: "It is 42." }]);
      expect(second.stop_reason).toBe("end_turn");
      expect(second.usage.output_tokens).toBe(mockEncode("It is 42.").length);

      const sent = tap.slice(before).map((e) => JSON.parse(e.requestBody));
      expect(sent[1].messages).toEqual([
        { role: "system", content: "be exact" },
        { role: "user", content: "6 times 7?" },
        {
          role: "assistant",
          content: "Let me compute.",
          tool_calls: [
            { id: use.id, type: "function", function: { name: "calculator", arguments: '{"expr":"6*7"}' } },
          ],
        },
        { role: "tool", tool_call_id: use.id, content: "42" },
      ]);
      expect(sent[0]).toMatchObject({ max_tokens: 256, return_token_ids: true, logprobs: true });
      const spans = (await h.spans(rolloutId)).sort((x, y) => x.sequence_id - y.sequence_id);
      expect(spans).toHaveLength(2);
      spans.forEach((span, i) => {
        const a = span.attributes as Record<string, any>;
        expect(a["agl.proxy.attribution"]).toBe("token");
        expect(a["agl.proxy.client_api"]).toBe("messages");
        expect(a.prompt_token_ids).toEqual(mockEncode(JSON.stringify(sent[i].messages)));
      });
      expect(mockDecode(spans[1]!.attributes.response_token_ids as number[])).toBe("It is 42.");
    });
  }

  it("max_tokens → stop_reason max_tokens; bad bodies get Anthropic 400s naming the field", async () => {
    const { client } = await clientFor();
    const cut = await client.messages.create({
      model: "m",
      max_tokens: 3,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(cut.stop_reason).toBe("max_tokens");
    await expect(
      client.messages.create({ model: "m", messages: [{ role: "user", content: "hi" }] } as any),
    ).rejects.toMatchObject({
      status: 400,
      error: { type: "error", error: { type: "invalid_request_error" } },
    });
    await expect(
      client.messages.create({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: [{ type: "tool_use", id: "x", name: "f", input: {} }] }],
      } as any),
    ).rejects.toMatchObject({ status: 400, message: expect.stringContaining("messages.0.content.0") });
  });

  it("x-api-key is checked like a bearer token: none is 401, another attempt's token is 403", async () => {
    const anonymous = new Anthropic({ baseURL: h.url, apiKey: "not-a-token", maxRetries: 0 });
    await expect(
      anonymous.messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 401 });
    const a = await h.newAttempt();
    const b = await h.newAttempt();
    const wrong = new Anthropic({
      baseURL: `${h.url}/rollout/${a.rolloutId}/attempt/${a.attemptId}`,
      apiKey: h.proxy.mintAttemptToken(b.rolloutId, b.attemptId),
      maxRetries: 0,
    });
    await expect(
      wrong.messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
    ).rejects.toMatchObject({ status: 403 });
  });
});
