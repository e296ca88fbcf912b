import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MessagesDialect } from "./messages-dialect.js";
import { messagesToChat, parseMessagesRequest } from "./messages-request.js";
import { ResponseHistory } from "./response-history.js";
import { ResponsesDialect } from "./responses-dialect.js";
import { parseResponsesRequest } from "./responses-request.js";

interface Answer {
  text: string | null;
  calls: Array<{ name: string; args: string }>;
  finish: "stop" | "length" | "tool_calls";
  stopReason: string | null;
}

/** The chat answer as vLLM returns it, non-streamed and as SSE bytes split at arbitrary points. */
function chatForms(a: Answer, splits: number[]) {
  const toolCalls = a.calls.map((c, j) => ({
    id: `call_${j}`,
    type: "function",
    function: { name: c.name, arguments: c.args },
  }));
  const finish = a.calls.length ? "tool_calls" : a.finish;
  const usage = { prompt_tokens: 7, completion_tokens: 5, total_tokens: 12 };
  const body = {
    id: "chatcmpl-1",
    model: "policy",
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: a.text,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finish,
        stop_reason: a.stopReason,
      },
    ],
    usage,
  };
  const chunks: unknown[] = [
    { id: "chatcmpl-1", model: "policy", choices: [{ index: 0, delta: { role: "assistant", content: "" } }] },
  ];
  for (const piece of (a.text ?? "").match(/.{1,3}/gsu) ?? [])
    chunks.push({ id: "chatcmpl-1", choices: [{ index: 0, delta: { content: piece } }] });
  a.calls.forEach((c, j) => {
    chunks.push({
      choices: [
        {
          index: 0,
          delta: {
            tool_calls: [
              { index: j, id: `call_${j}`, type: "function", function: { name: c.name, arguments: "" } },
            ],
          },
        },
      ],
    });
    for (const piece of c.args.match(/.{1,5}/gsu) ?? [])
      chunks.push({
        choices: [{ index: 0, delta: { tool_calls: [{ index: j, function: { arguments: piece } }] } }],
      });
  });
  chunks.push({ choices: [{ index: 0, delta: {}, finish_reason: finish, stop_reason: a.stopReason }] });
  chunks.push({ choices: [], usage });
  const sse = Buffer.from(`${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`);
  const cuts = [...new Set(splits.map((s) => s % sse.length))].sort((x, y) => x - y);
  const pieces: Buffer[] = [];
  let at = 0;
  for (const cut of [...cuts, sse.length]) {
    pieces.push(sse.subarray(at, cut));
    at = cut;
  }
  return { json: Buffer.from(JSON.stringify(body)), pieces };
}

const events = (sse: string) =>
  sse
    .split("\n\n")
    .filter(Boolean)
    .map((block) =>
      JSON.parse(
        block
          .split("\n")
          .find((l) => l.startsWith("data: "))!
          .slice(6),
      ),
    );

const answers = fc.record({
  text: fc.option(fc.string({ maxLength: 30, unit: "grapheme" }), { nil: null }),
  calls: fc.array(
    fc.record({
      name: fc.constantFrom("add", "search"),
      args: fc.dictionary(fc.string({ maxLength: 4 }), fc.integer()).map((o) => JSON.stringify(o)),
    }),
    { maxLength: 2 },
  ),
  finish: fc.constantFrom("stop" as const, "length" as const),
  stopReason: fc.option(fc.constantFrom("</s>", "STOP"), { nil: null }),
});
const splits = fc.array(fc.nat(), { maxLength: 6 });

describe("dialect translations: a streamed answer re-encodes to what the non-streamed one does", () => {
  it("Responses: response.completed carries the same output, status and usage as the JSON answer", () => {
    fc.assert(
      fc.property(answers, splits, (a, cuts) => {
        const request = parseResponsesRequest({ model: "m", input: "q", stream: true });
        const { json, pieces } = chatForms(a, cuts);
        const history = new ResponseHistory();
        const whole = JSON.parse(
          new ResponsesDialect(request, [], [], history, null, "0123456789abcdef")
            .translateResponse(200, json, "application/json")
            .body.toString(),
        );
        const stream = new ResponsesDialect(
          request,
          [],
          [],
          history,
          null,
          "0123456789abcdef",
        ).createStream();
        const sse = pieces.map((p) => stream.push(p)).join("") + stream.end();
        const evs = events(sse);
        expect(evs[0].type).toBe("response.created");
        expect(evs.map((e) => e.sequence_number)).toEqual(evs.map((_, i) => i));
        const done = evs.at(-1);
        expect(done.type).toBe(whole.status === "incomplete" ? "response.incomplete" : "response.completed");
        const strip = (out: any[]) => out.map(({ id: _, ...item }) => item);
        expect(strip(done.response.output)).toEqual(strip(whole.output));
        expect(done.response.usage).toEqual(whole.usage);
        const deltas = evs
          .filter((e) => e.type === "response.output_text.delta")
          .map((e) => e.delta)
          .join("");
        expect(deltas).toBe(a.text ?? "");
        for (const [j, c] of a.calls.entries()) {
          const item = whole.output.filter((o: any) => o.type === "function_call")[j];
          expect(item).toMatchObject({ name: c.name, arguments: c.args, call_id: `call_${j}` });
        }
        expect(whole.status).toBe(a.finish === "length" && !a.calls.length ? "incomplete" : "completed");
      }),
      { numRuns: 150 },
    );
  });

  it("Messages: the event stream rebuilds the same content blocks and stop_reason as the JSON answer", () => {
    fc.assert(
      fc.property(answers, splits, (a, cuts) => {
        const request = parseMessagesRequest({
          model: "m",
          max_tokens: 10,
          stop_sequences: ["STOP"],
          messages: [{ role: "user", content: "q" }],
          stream: true,
        });
        const { json, pieces } = chatForms(a, cuts);
        const whole = JSON.parse(
          new MessagesDialect(request).translateResponse(200, json, "application/json").body.toString(),
        );
        const stream = new MessagesDialect(request).createStream();
        const evs = events(pieces.map((p) => stream.push(p)).join("") + stream.end());
        expect(evs[0].type).toBe("message_start");
        expect(evs.at(-1).type).toBe("message_stop");
        const blocks: any[] = [];
        for (const e of evs) {
          if (e.type === "content_block_start") blocks[e.index] = { ...e.content_block, json: "" };
          if (e.type === "content_block_delta" && e.delta.type === "text_delta")
            blocks[e.index].text += e.delta.text;
          if (e.type === "content_block_delta" && e.delta.type === "input_json_delta")
            blocks[e.index].json += e.delta.partial_json;
        }
        const rebuilt = blocks.map(({ json, ...b }) =>
          b.type === "tool_use" ? { ...b, input: JSON.parse(json || "{}") } : b,
        );
        expect(rebuilt).toEqual(whole.content);
        const delta = evs.find((e) => e.type === "message_delta");
        expect(delta.delta.stop_reason).toBe(whole.stop_reason);
        const expected = a.calls.length
          ? "tool_use"
          : a.finish === "length"
            ? "max_tokens"
            : a.stopReason === "STOP"
              ? "stop_sequence"
              : "end_turn";
        expect(whole.stop_reason).toBe(expected);
        expect(whole.stop_sequence).toBe(expected === "stop_sequence" ? "STOP" : null);
      }),
      { numRuns: 150 },
    );
  });

  it("requests: Anthropic tool results go before the user's text; tool_choice maps; unknown blocks are named", () => {
    const chat = messagesToChat(
      parseMessagesRequest({
        model: "m",
        max_tokens: 5,
        system: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
        tool_choice: { type: "any", disable_parallel_tool_use: true },
        tools: [{ name: "f", input_schema: { type: "object" } }],
        messages: [
          { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: { x: 1 } }] },
          {
            role: "user",
            content: [
              {
                type: "tool_result",
                tool_use_id: "t1",
                content: [{ type: "text", text: "1" }],
                is_error: true,
              },
              { type: "text", text: "now?" },
            ],
          },
        ],
      }),
    );
    expect(chat.messages).toEqual([
      { role: "system", content: "ab" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "t1", type: "function", function: { name: "f", arguments: '{"x":1}' } }],
      },
      { role: "tool", tool_call_id: "t1", content: "Error: 1" },
      { role: "user", content: "now?" },
    ]);
    expect(chat).toMatchObject({ tool_choice: "required", parallel_tool_calls: false });
    const withDocument = {
      model: "m",
      max_tokens: 1,
      messages: [{ role: "user", content: [{ type: "document" }] }],
    };
    expect(() => messagesToChat(parseMessagesRequest(withDocument))).toThrow(/messages\.0\.content\.0\.type/);
  });
});
