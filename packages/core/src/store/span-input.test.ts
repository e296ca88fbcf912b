import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SpanSchema } from "../types/span.js";
import { copyData } from "./inputs.js";
import { areCanonicalSpans, isCanonicalSpan } from "./span-input.js";

const context = { trace_id: "t1", span_id: "s1", is_remote: false, trace_state: { k: "v" } };
const full = () => ({
  rollout_id: "ro-1",
  attempt_id: "at-1",
  sequence_id: 3,
  trace_id: "t1",
  span_id: "s1",
  parent_id: null,
  name: "openai.chat.completion",
  status: { status_code: "OK", description: null },
  attributes: { "gen_ai.system": "openai", prompt_token_ids: [1, 2, 3], nested: { a: [1.5] } },
  events: [{ name: "e", attributes: {}, timestamp: 1.5 }],
  links: [{ context, attributes: null }],
  start_time: 1,
  end_time: 2,
  context,
  parent: null,
  resource: { attributes: { "service.name": "x" }, schema_url: "" },
  extra_key: { kept: true },
});

/** Values a field may be replaced by: valid ones of other fields, and invalid ones. */
const replacement = fc
  .constantFrom<unknown>(
    undefined,
    null,
    "",
    "x",
    0,
    -1,
    1.5,
    Number.NaN,
    Number.POSITIVE_INFINITY,
    2 ** 60,
    true,
    [],
    [undefined],
    {},
    { status_code: "ERROR", description: "boom" },
    { status_code: "BAD", description: null },
    context,
    { ...context, trace_state: { k: 1 } },
    { attributes: {}, schema_url: "" },
    { name: "e", attributes: {}, timestamp: null },
    [{ name: "e", attributes: {}, timestamp: null }],
    [{ context, attributes: {} }],
    new Date(0),
  )
  .map((v) => copyData(v)); // fresh each time: the property edits values in place

describe("isCanonicalSpan", () => {
  it("accepts a complete span, which SpanSchema returns unchanged", () => {
    const span = full();
    expect(isCanonicalSpan(span)).toBe(true);
    expect(SpanSchema.parse(span)).toEqual(span);
    expect(areCanonicalSpans([span, full()])).toBe(true);
  });

  it("leaves spans that need defaults or are invalid to SpanSchema", () => {
    const { status: _status, ...noStatus } = full();
    expect(isCanonicalSpan(noStatus)).toBe(false);
    expect(isCanonicalSpan({ ...full(), sequence_id: 1.5 })).toBe(false);
    expect(isCanonicalSpan({ ...full(), events: [undefined] })).toBe(false);
    // a hole in the list is an undefined span for zod
    const holey = [full(), full()];
    delete holey[0];
    expect(areCanonicalSpans(holey)).toBe(false);
  });

  it("never accepts what SpanSchema rejects or would change (any one or two fields replaced)", () => {
    const keys = Object.keys(full());
    const nestedKeys = [
      "status.status_code",
      "status.description",
      "context.is_remote",
      "resource.schema_url",
    ];
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom(...keys, ...nestedKeys), replacement), {
          minLength: 1,
          maxLength: 2,
        }),
        (edits) => {
          const span: Record<string, any> = copyData(full());
          for (const [key, value] of edits) {
            const [outer, inner] = key.split(".") as [string, string | undefined];
            if (inner === undefined) span[outer] = value;
            else if (span[outer] && typeof span[outer] === "object") span[outer][inner] = value;
          }
          if (!isCanonicalSpan(span)) return;
          const parsed = SpanSchema.safeParse(span);
          expect(parsed.success).toBe(true);
          expect(parsed.data).toEqual(span);
        },
      ),
      { numRuns: 3000 },
    );
  });
});
