import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findUnstorable } from "../types/input-rules.js";
import { SpanSchema } from "../types/span.js";
import { parseSpanInput, SANITIZED_ATTRIBUTE, sanitizeSpanInput, sanitizeText } from "./span-sanitize.js";

/** An independent reference: walk UTF-16 code units, pairing surrogates by hand. */
function referenceSanitize(s: string): string {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0) out += "\uFFFD";
    else if (c >= 0xd800 && c <= 0xdbff) {
      const next = i + 1 < s.length ? s.charCodeAt(i + 1) : -1;
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += s[i]! + s[i + 1]!;
        i++;
      } else out += "\uFFFD";
    } else if (c >= 0xdc00 && c <= 0xdfff) out += "\uFFFD";
    else out += s[i]!;
  }
  return out;
}

/** Strings rich in the code units that matter: NUL, both surrogate halves, ordinary text. */
const nasty = fc
  .array(fc.constantFrom("\u0000", "\ud800", "\udbff", "\udc00", "\udfff", "a", "é", "\uFFFD", "😀"), {
    maxLength: 12,
  })
  .map((parts) => parts.join(""));

describe("sanitizeText", () => {
  it("matches the reference on any string and leaves storable text alone", () => {
    fc.assert(
      fc.property(fc.oneof(nasty, fc.string({ unit: "binary" })), (s) => {
        const out = sanitizeText(s);
        expect(out).toBe(referenceSanitize(s));
        expect(findUnstorable(out)).toBeNull();
        if (findUnstorable(s) === null) expect(out).toBe(s);
        // Code-unit length is kept (each bad unit becomes one U+FFFD).
        expect(out.length).toBe(s.length);
      }),
      { numRuns: 2000 },
    );
  });
});

describe("sanitizeSpanInput", () => {
  const base = {
    rollout_id: "ro-1",
    attempt_id: "at-1",
    sequence_id: 1,
    trace_id: "t",
    span_id: "s",
    name: "n",
  };

  it("any attributes: the result is storable, keeps every key, and is marked only when something changed", () => {
    fc.assert(
      fc.property(
        fc.dictionary(nasty, fc.oneof(nasty, fc.integer(), fc.array(nasty, { maxLength: 3 }))),
        (attrs) => {
          const input = { ...base, attributes: attrs };
          const span = parseSpanInput(input, "span");
          expect(findUnstorable(span)).toBeNull();
          const changed = findUnstorable(attrs) !== null;
          expect(span.attributes[SANITIZED_ATTRIBUTE]).toBe(changed ? true : undefined);
          expect(Object.keys(span.attributes).length).toBe(Object.keys(attrs).length + (changed ? 1 : 0));
          // Values are sanitised one for one (the multiset of sanitised values is preserved).
          const values = (o: Record<string, unknown>) =>
            Object.entries(o)
              .filter(([k]) => k !== SANITIZED_ATTRIBUTE)
              .map(([, v]) => JSON.stringify(v, (_k, x) => (typeof x === "string" ? sanitizeText(x) : x)))
              .sort();
          expect(values(span.attributes)).toEqual(values(attrs));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("returns the same object when nothing needs it; ids are never rewritten", () => {
    const clean = { ...base, attributes: { a: "b" } };
    expect(sanitizeSpanInput(clean)).toBe(clean);
    const badId = { ...base, rollout_id: "ro\u0000", name: "x\u0000" };
    const out = sanitizeSpanInput(badId) as typeof badId;
    expect(out.rollout_id).toBe("ro\u0000");
    expect(out.name).toBe("x\uFFFD");
    expect(SpanSchema.safeParse(out).success).toBe(false);
  });

  it("a key named __proto__ stays an ordinary key", () => {
    const attributes = JSON.parse('{"__proto__": "p\\u0000", "k": 1}');
    const out = sanitizeSpanInput({ ...base, attributes }) as { attributes: Record<string, unknown> };
    expect(Object.getPrototypeOf(out.attributes)).toBe(Object.prototype);
    expect(Object.hasOwn(out.attributes, "__proto__")).toBe(true);
    expect(Object.getOwnPropertyDescriptor(out.attributes, "__proto__")?.value).toBe("p\uFFFD");
  });

  it("unknown keys with NUL in context, parent and resource are refused by SpanSchema and sanitised on input", () => {
    const ctx = { trace_id: "t", span_id: "s", is_remote: false, trace_state: {} };
    for (const field of ["context", "parent"] as const) {
      const dirty = { ...base, [field]: { ...ctx, "k\u0000": 1 } };
      expect(SpanSchema.safeParse(dirty).error?.issues[0]?.path).toEqual([field, "k\u0000"]);
      expect(parseSpanInput(dirty, "span")[field]).toEqual({ ...ctx, "k\uFFFD": 1 });
    }
    const resource = { ...base, resource: { attributes: {}, schema_url: "", "r\u0000": "x" } };
    expect(SpanSchema.safeParse(resource).success).toBe(false);
    expect(parseSpanInput(resource, "span").resource).toEqual({
      attributes: {},
      schema_url: "",
      "r\uFFFD": "x",
    });
    const top = { ...base, "extra\u0000": 1 };
    expect(SpanSchema.safeParse(top).success).toBe(false);
    expect(parseSpanInput(top, "span")).toMatchObject({ "extra\uFFFD": 1 });
  });
});
