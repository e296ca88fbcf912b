/** TraceToTriplets rules not covered elsewhere: the nested-call rule and the remaining Weave token keys. */
import type { Attributes } from "@agl/core";
import { describe, expect, it } from "vitest";
import { llmAttrs, mkSpan } from "./test-helpers.js";
import { TraceToTriplets } from "./trace-to-triplets.js";

/** An LLM span as a wrapper library writes it inside the client's span: same call, no response id. */
function withoutResponseId(a: Attributes): Attributes {
  const { "gen_ai.response.id": _dropped, ...rest } = a;
  return rest;
}

describe("nested_llm_call", () => {
  const outer = mkSpan({
    id: "outer",
    name: "openai.chat.completion",
    start: 0,
    end: 10,
    attributes: llmAttrs({ responseId: "r-outer", promptIds: [1, 2], responseIds: [3] }),
  });
  const inner = (id: string, parent: string | null, start: number, attributes: Attributes) =>
    mkSpan({ id, parent, name: "openai.chat.completion", start, end: start + 1, attributes });

  it("drops a call without a response id inside an already-taken call, with an info diagnostic", () => {
    const spans = [outer, inner("inner", "outer", 2, withoutResponseId(llmAttrs({ responseId: "x" })))];
    const analysis = new TraceToTriplets().analyze(spans);
    expect(analysis.calls.map((c) => [c.node.id, c.kept, c.dropReason])).toEqual([
      ["outer", true, null],
      ["inner", false, "nested_llm_call"],
    ]);
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics(spans);
    expect(output.map((t) => t.metadata.span_id)).toEqual(["outer"]);
    const d = diagnostics.diagnostics.find((x) => x.code === "nested_llm_call")!;
    expect(d).toMatchObject({ severity: "info", spanId: "inner", spanName: "openai.chat.completion" });
    expect(d.message).toMatch(/nested in an LLM call already taken and has no response id/);
  });

  it("applies at any depth below the taken call, not only to direct children", () => {
    const spans = [
      outer,
      mkSpan({ id: "http", parent: "outer", name: "http.request", start: 1, end: 9 }),
      inner("deep", "http", 2, withoutResponseId(llmAttrs({ responseId: "x" }))),
    ];
    expect(new TraceToTriplets().analyze(spans).calls.map((c) => c.dropReason)).toEqual([
      null,
      "nested_llm_call",
    ]);
  });

  it("keeps a nested call that has its own response id, and a call without id that is not nested", () => {
    const spans = [
      outer,
      inner("own-id", "outer", 2, llmAttrs({ responseId: "r-inner", promptIds: [4], responseIds: [5] })),
      inner("sibling", null, 20, withoutResponseId(llmAttrs({ responseId: "x" }))),
    ];
    const analysis = new TraceToTriplets().analyze(spans);
    expect(analysis.calls.map((c) => [c.node.id, c.kept])).toEqual([
      ["outer", true],
      ["own-id", true],
      ["sibling", true],
    ]);
  });
});

describe("Weave token keys", () => {
  const weaveSpan = (id: string, tokenKeys: Attributes) =>
    mkSpan({
      id,
      name: "openai.chat.completion",
      attributes: {
        "agentlightning.operation.name": "openai.chat.completion",
        "agentlightning.operation.output.id": `resp-${id}`,
        "agentlightning.operation.output.prompt_token_ids": [5, 6, 7],
        "agentlightning.operation.output.choices.0.message.role": "assistant",
        "agentlightning.operation.output.choices.0.message.content": "ok",
        ...tokenKeys,
      },
    });

  it.each<[string, Attributes, number[]]>([
    // Weave flattens vLLM's list-per-choice `response_token_ids` one level: key `.0` holds choice 0's list
    ["response_token_ids.0", { "agentlightning.operation.output.response_token_ids.0": [8, 9] }, [8, 9]],
    // unflattened, the same list-per-choice
    [
      "response_token_ids as lists",
      { "agentlightning.operation.output.response_token_ids": [[10, 11]] },
      [10, 11],
    ],
    // LiteLLM puts vLLM's extra choice fields under provider_specific_fields
    [
      "choices.0.provider_specific_fields.token_ids",
      { "agentlightning.operation.output.choices.0.provider_specific_fields.token_ids": [12, 13, 14] },
      [12, 13, 14],
    ],
  ])("reads %s", (_key, tokenKeys, expected) => {
    const [t] = new TraceToTriplets().adapt([weaveSpan("w", tokenKeys)]);
    expect(t!.prompt.token_ids).toEqual([5, 6, 7]);
    expect(t!.response.token_ids).toEqual(expected);
    expect(t!.metadata).toMatchObject({ response_id: "resp-w", family: "weave" });
  });

  it("reads them from nested (OTLP-ingested) attributes and from a whole `choices` list or its JSON", () => {
    const choice = {
      message: { role: "assistant", content: "ok" },
      provider_specific_fields: { token_ids: [2, 3] },
    };
    const nested = (choices: unknown) =>
      mkSpan({
        id: "n",
        name: "openai.chat.completion",
        attributes: {
          agentlightning: { operation: { output: { id: "resp-n", prompt_token_ids: [1], choices } } },
        } as unknown as Attributes,
      });
    for (const choices of [{ "0": choice }, [choice], JSON.stringify([choice])]) {
      const [t] = new TraceToTriplets().adapt([nested(choices)]);
      expect(
        [t!.prompt.token_ids, t!.response.token_ids, t!.response.raw_content],
        JSON.stringify(choices),
      ).toEqual([[1], [2, 3], expect.anything()]);
    }
  });

  it("without any of them the call is reported as missing response token ids", () => {
    const { output, diagnostics } = new TraceToTriplets().adaptWithDiagnostics([weaveSpan("e", {})]);
    expect(output[0]!.response.token_ids).toEqual([]);
    expect(diagnostics.counts.missing_token_ids).toBe(1);
  });
});
