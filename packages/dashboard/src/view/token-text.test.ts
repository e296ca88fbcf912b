import type { Attributes, Span } from "@agl/core";
import { describe, expect, it } from "vitest";
import { analyzeRollout } from "./llm-calls.js";
import { showPiece, tokenTextOf } from "./token-text.js";
import { tripletTokens } from "./tokens.js";

function llmSpan(id: string, attributes: Attributes): Span {
  return {
    rollout_id: "ro-1",
    attempt_id: "at-1",
    sequence_id: Number(id.slice(1)),
    trace_id: "t".repeat(32),
    span_id: id,
    parent_id: null,
    name: "openai.chat.completion",
    status: { status_code: "OK", description: null },
    attributes,
    events: [],
    links: [],
    start_time: 0,
    end_time: 1,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  };
}

const call = (promptIds: number[], responseIds: number[], pieces: string[] | null): Attributes => ({
  "gen_ai.request.model": "m",
  "gen_ai.prompt.0.role": "user",
  "gen_ai.prompt.0.content": "Hi there",
  "gen_ai.completion.0.role": "assistant",
  "gen_ai.completion.0.content": pieces?.join("") ?? "",
  prompt_token_ids: promptIds,
  response_token_ids: responseIds,
  ...(pieces
    ? {
        "logprobs.content": JSON.stringify(
          pieces.map((token, i) => ({ token, logprob: -i / 10, bytes: null, top_logprobs: [] })),
        ),
      }
    : {}),
});

describe("token text from spans", () => {
  it("pairs each response id with its logprobs token; the ids decode wherever they appear", () => {
    const spans = [llmSpan("s1", call([9, 10], [20, 21, 22], ["Hello", " world", "\n"]))];
    const text = tokenTextOf(spans);
    expect([...text]).toEqual([
      [20, "Hello"],
      [21, " world"],
      [22, "\n"],
    ]);
    // Through the adapter, as the page shows the triplet: response ids have text, prompt ids stay ids.
    const analysis = analyzeRollout(spans);
    expect(analysis.tokenText).toEqual(text);
    const cells = tripletTokens(analysis.triplets[0]!);
    expect(cells.map((c) => analysis.tokenText.get(c.id) ?? c.id)).toEqual([9, 10, "Hello", " world", "\n"]);
  });

  it("skips token_id:N pieces, misaligned lists and spans without logprobs", () => {
    const spans = [
      llmSpan("s1", call([1], [30, 31], ["token_id:30", "token_id:31"])),
      llmSpan("s2", call([1], [40, 41], ["only one"])),
      llmSpan("s3", call([1], [50], null)),
    ];
    expect(tokenTextOf(spans).size).toBe(0);
  });

  it("reads a captured response body's logprobs too", () => {
    const body = {
      choices: [
        {
          logprobs: {
            content: [
              { token: "Yes", logprob: 0 },
              { token: ".", logprob: -1 },
            ],
          },
        },
      ],
    };
    const spans = [llmSpan("s1", { ...call([1], [7, 8], null), "agl.proxy.response": JSON.stringify(body) })];
    expect([...tokenTextOf(spans)]).toEqual([
      [7, "Yes"],
      [8, "."],
    ]);
  });

  it("shows whitespace the way tokenizer playgrounds do", () => {
    expect(showPiece(" the\tend\n")).toBe("·the→end↵");
  });
});
