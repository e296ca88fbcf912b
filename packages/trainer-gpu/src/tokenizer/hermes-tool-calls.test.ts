import { execFileSync } from "node:child_process";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseHermesToolCalls } from "./hermes-tool-calls.js";
import { pythonFloatRepr, pythonJsonDumps } from "./python-json.js";

const ids = () => {
  let n = 0;
  return () => `call_${n++}`;
};

/** Python's own json.dumps(json.loads(text), ensure_ascii=False) for each text (the reference). */
function pythonDumps(texts: string[]): string[] {
  const code =
    "import json,sys\nprint(json.dumps([json.dumps(json.loads(t), ensure_ascii=False) for t in json.loads(sys.stdin.read())]))";
  return JSON.parse(execFileSync("python3", ["-c", code], { input: JSON.stringify(texts) }).toString("utf8"));
}

describe("pythonJsonDumps", () => {
  it("writes JSON exactly as Python's json.dumps(ensure_ascii=False)", () => {
    const texts = [
      '{"a":1,"b":[1.0,2.5,-0.0,1e-5,1E+16,123456789012345678901234567890,1e300],"c":{"d":null,"e":true}}',
      '{"s":"quote \\" backslash \\\\ newline \\n tab \\t ctrl \\u0001 slash \\/ é 中 👋 \\ud83d\\ude00"}',
      "[0.1, 0.30000000000000004, 100.0, 1234567.125, 0.0001, 0.00001, 12345678901234567.0]",
      '"plain"',
      "  {  }  ",
    ];
    expect(texts.map(pythonJsonDumps)).toEqual(pythonDumps(texts));
  });

  it("matches Python's float repr on random doubles (property)", () => {
    const samples = fc.sample(fc.double({ noNaN: true, noDefaultInfinity: true }), { numRuns: 300, seed: 7 });
    // float literals (a literal without "." or exponent is a Python int)
    const texts = samples.map((x) => {
      const t = JSON.stringify(x);
      return /[.eE]/.test(t) ? t : `${t}.0`;
    });
    expect(texts.map(pythonJsonDumps)).toEqual(pythonDumps(texts));
    expect(pythonFloatRepr(-0)).toBe("-0.0");
  });
});

describe("parseHermesToolCalls (vLLM hermes semantics)", () => {
  it("parses Qwen-style blocks, keeps the text before the first block as content", () => {
    const text =
      'Let me check.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "calc", "arguments": {"expr": "1+1", "x": 1.0}}\n</tool_call>';
    expect(parseHermesToolCalls(text, ids())).toEqual({
      content: "Let me check.",
      toolCalls: [
        {
          id: "call_0",
          type: "function",
          function: { name: "get_weather", arguments: '{"city": "Paris", "days": 3}' },
        },
        {
          id: "call_1",
          type: "function",
          function: { name: "calc", arguments: '{"expr": "1+1", "x": 1.0}' },
        },
      ],
    });
  });

  it("content is null when the output starts with a call; a final unclosed block still parses", () => {
    const out = parseHermesToolCalls('<tool_call>{"name": "f", "arguments": {}}', ids());
    expect(out).toEqual({
      content: null,
      toolCalls: [{ id: "call_0", type: "function", function: { name: "f", arguments: "{}" } }],
    });
  });

  it("arguments of any JSON type are re-serialised; string arguments become a JSON string", () => {
    const out = parseHermesToolCalls('<tool_call>{"name":"f","arguments":"{\\"a\\": 1}"}</tool_call>', ids());
    expect(out.toolCalls[0]?.function.arguments).toBe('"{\\"a\\": 1}"');
  });

  it("returns the whole output as content for malformed calls", () => {
    for (const bad of [
      "<tool_call>not json</tool_call>",
      '<tool_call>{"arguments": {}}</tool_call>',
      '<tool_call>{"name": "f"}</tool_call>',
      '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
      '<tool_call>["f", {}]</tool_call>',
      '<tool_call>{"name": "f", "arguments": {}}</tool_call> and <tool_call>{"name": "g", "argu',
      "<tool_call>",
    ]) {
      expect(parseHermesToolCalls(`pre ${bad}`)).toEqual({ content: `pre ${bad}`, toolCalls: [] });
    }
    expect(parseHermesToolCalls("no calls here")).toEqual({ content: "no calls here", toolCalls: [] });
  });

  it("never throws on arbitrary output (fuzz)", () => {
    const piece = fc.oneof(
      fc.string(),
      fc.constantFrom("<tool_call>", "</tool_call>", "{", "}", '"name"', '"arguments"', ":", ",", "\n"),
      fc.json(),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
        const text = parts.join("");
        const out = parseHermesToolCalls(text);
        if (out.toolCalls.length === 0) expect(out.content).toBe(text);
        for (const c of out.toolCalls) expect(() => JSON.parse(c.function.arguments)).not.toThrow();
      }),
      { numRuns: 500, seed: 3 },
    );
  });
});
