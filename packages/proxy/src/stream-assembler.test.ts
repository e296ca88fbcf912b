import { describe, expect, it } from "vitest";
import { StreamAssembler } from "./stream-assembler.js";

const sse = (chunk: unknown) => Buffer.from(`data: ${JSON.stringify(chunk)}\n\n`);
const delta = (d: Record<string, unknown>, index: unknown = 0) => ({
  id: "c1",
  model: "m",
  choices: [{ index, delta: d, finish_reason: null }],
});

describe("StreamAssembler bounds", () => {
  it("ignores a tool call index past the limit instead of allocating up to it", () => {
    const a = new StreamAssembler(true);
    const before = process.memoryUsage().heapUsed;
    a.push(sse(delta({ role: "assistant", tool_calls: [{ index: 0, id: "t0", function: { name: "f" } }] })));
    a.push(
      sse(delta({ tool_calls: [{ index: 1e8, id: "evil", function: { name: "g", arguments: "{}" } }] })),
    );
    a.push(sse(delta({ tool_calls: [{ index: -1, function: { name: "h" } }, { index: 0.5 }, null] })));
    a.push(sse(delta({ tool_calls: [{ index: 0, function: { arguments: '{"x":1}' } }] })));
    a.push(Buffer.from("data: [DONE]\n\n"));
    const message = (a.result().choices as any[])[0].message;
    expect(message.tool_calls).toEqual([
      { id: "t0", type: "function", function: { name: "f", arguments: '{"x":1}' } },
    ]);
    expect(a.ignored).toBe(3);
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(64 * 1024 * 1024);
  });

  it("ignores choices whose index is out of range or not an integer", () => {
    const a = new StreamAssembler(true, { maxChoices: 4 });
    a.push(sse(delta({ content: "ok" }, 0)));
    for (const index of [4, 1e9, -1, 1.5, "2"]) a.push(sse(delta({ content: "bad" }, index)));
    a.push(sse(delta({ content: "!" }, 3)));
    const choices = a.result().choices as any[];
    expect(choices.map((c) => [c.index, c.message.content])).toEqual([
      [0, "ok"],
      [3, "!"],
    ]);
    expect(a.ignored).toBe(5);
  });

  it("stops recording past maxBytes (the limit bounds the SSE parser's buffer too)", () => {
    const a = new StreamAssembler(true, { maxBytes: 1024 });
    a.push(sse(delta({ content: "kept" })));
    // One event line with no end, as a hostile upstream might send: it must not be buffered without bound.
    a.push(Buffer.from(`data: {"choices":[{"index":0,"delta":{"content":"${"x".repeat(4096)}`));
    a.push(sse(delta({ content: "after" })));
    expect(a.truncated).toMatch(/longer than 1024 bytes/);
    expect((a.result().choices as any[])[0].message.content).toBe("kept");
  });

  it("appends large token id and logprob arrays without overflowing the call stack", () => {
    const a = new StreamAssembler(false);
    const ids = Array.from({ length: 300_000 }, (_, i) => i % 50_000);
    a.push(sse({ id: "c", choices: [{ index: 0, text: "t", token_ids: ids, logprobs: { tokens: ids } }] }));
    const choice = (a.result().choices as any[])[0];
    expect(choice.token_ids).toHaveLength(300_000);
    expect(choice.logprobs.tokens).toHaveLength(300_000);
  });
});
