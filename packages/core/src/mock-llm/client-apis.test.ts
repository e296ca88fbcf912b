import { expect, it } from "vitest";
import { startMockLLMServer } from "./server.js";

it("the mock's /v1/responses and /v1/messages check what they receive and answer in each API's format", async () => {
  const seen: unknown[] = [];
  const s = await startMockLLMServer({
    respond: (r) => {
      seen.push(r.body.messages);
      return { content: "ok" };
    },
  });
  const post = (path: string, body: unknown) =>
    fetch(`${s.baseURL}/${path}`, { method: "POST", body: JSON.stringify(body) });
  try {
    expect((await post("responses", { input: "x" })).status).toBe(400); // no model
    expect((await post("messages", { model: "m", messages: [] })).status).toBe(400); // no max_tokens
    const r: any = await (
      await post("responses", {
        model: "m",
        instructions: "sys",
        input: [
          { role: "user", content: [{ type: "input_text", text: "hi" }] },
          { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
          { type: "function_call_output", call_id: "c1", output: "1" },
        ],
      })
    ).json();
    expect(r).toMatchObject({ object: "response", status: "completed", output: [{ type: "message" }] });
    expect(seen[0]).toEqual([
      { role: "system", content: "sys" },
      { role: "user", content: "hi" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "1" },
    ]);
    const stored: any = await (
      await post("responses", { model: "m", input: [{ type: "item_reference", id: r.output[0].id }] })
    ).json();
    expect(stored.status).toBe("completed");
    expect(seen[1]).toEqual([{ role: "assistant", content: "ok" }]);
    const m: any = await (
      await post("messages", {
        model: "m",
        max_tokens: 5,
        system: "s",
        messages: [{ role: "user", content: "hey" }],
      })
    ).json();
    expect(m).toMatchObject({
      type: "message",
      content: [{ type: "text", text: "ok" }],
      stop_reason: "end_turn",
    });
    const streamed = await (
      await post("messages", {
        model: "m",
        max_tokens: 5,
        stream: true,
        messages: [{ role: "user", content: "hey" }],
      })
    ).text();
    expect(streamed.match(/^event: (\w+)/gm)?.map((l) => l.slice(7))).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  } finally {
    await s.close();
  }
});
