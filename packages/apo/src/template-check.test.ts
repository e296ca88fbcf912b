import { formatPromptTemplate, InvalidArgumentError } from "@agl/core";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { checkCandidate, extractPrompt, templateVariables } from "./template-check.js";

const check = (prompt: string | null, existing: string[] = []) =>
  checkCandidate(prompt, {
    requiredVariables: ["question", "context"],
    engine: "f-string",
    maxPromptChars: 200,
    existing: new Set(existing),
  });

describe("templateVariables", () => {
  it("reads f-string placeholders, skipping {{ }} escapes, in order of first use", () => {
    expect(templateVariables("Q: {question} / {context} / {question}", "f-string")).toEqual([
      "question",
      "context",
    ]);
    expect(templateVariables('JSON like {{"a": 1}} then { question }', "f-string")).toEqual(["question"]);
    expect(templateVariables("no placeholders", "f-string")).toEqual([]);
  });

  it("returns null for what formatting would choke on", () => {
    for (const bad of ["a { b", "a } b", '{"a": 1}', "{}", "{0}", "{a.b}"]) {
      expect(templateVariables(bad, "f-string")).toBeNull();
    }
  });

  it("reads jinja expressions and leaves poml unchecked", () => {
    expect(templateVariables("{{ question }} {%- if x %}{{- context | trim }}{% endif %}", "jinja")).toEqual([
      "question",
      "context",
    ]);
    expect(templateVariables("<poml>{{ q }}</poml>", "poml")).toBeNull();
  });

  it("agrees with the core formatter: exactly the names found must be given (property)", () => {
    const name = fc.stringMatching(/^[a-z_][a-z0-9_]{0,7}$/);
    const piece = fc.oneof(
      name.map((n) => ({ text: `{${n}}`, name: n })),
      fc.constantFrom("{{", "}}", " ", "text", "\n", "{{x}}").map((text) => ({ text, name: undefined })),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (pieces) => {
        const template = pieces.map((p) => p.text).join("");
        const names = [...new Set(pieces.flatMap((p) => (p.name ? [p.name] : [])))];
        const found = templateVariables(template, "f-string");
        expect(found).toEqual(names);
        const values = Object.fromEntries(names.map((n) => [n, `<${n}>`]));
        expect(() => formatPromptTemplate(template, values)).not.toThrow();
        for (const missing of names) {
          const { [missing]: _, ...rest } = values;
          expect(() => formatPromptTemplate(template, rest)).toThrow(InvalidArgumentError);
        }
      }),
    );
  });
});

describe("extractPrompt", () => {
  it("takes <prompt> tags, else a lone fenced block, else the trimmed reply", () => {
    expect(extractPrompt("Here you go:\n<prompt>\nNew {question}\n</prompt>\nHope it helps")).toBe(
      "New {question}",
    );
    expect(extractPrompt("```text\nNew {question}\n```")).toBe("New {question}");
    expect(extractPrompt("  New {question}  \n")).toBe("New {question}");
    expect(extractPrompt(null)).toBeNull();
    expect(extractPrompt(undefined)).toBeNull();
    expect(extractPrompt("")).toBe("");
  });
});

describe("checkCandidate", () => {
  it("accepts a template with exactly the required placeholders", () => {
    expect(check("Use {context} to answer {question}.")).toEqual({
      ok: true,
      template: "Use {context} to answer {question}.",
    });
  });

  it("names the reason for each unusable edit", () => {
    const reason = (p: string | null, existing?: string[]) => {
      const v = check(p, existing);
      return v.ok ? "ok" : v.reason;
    };
    expect(reason(null)).toBe("no_prompt");
    expect(reason("  \n ")).toBe("empty_prompt");
    expect(reason(`{question}{context}${"x".repeat(300)}`)).toBe("huge_prompt");
    expect(reason("Answer {question} with {context} as {{json}} but { broken")).toBe("invalid_template");
    expect(reason("Answer {question}.")).toBe("missing_variables");
    expect(reason("Answer {question} with {context} for {user}.")).toBe("unknown_variables");
    expect(reason("{question} {context}", ["{question} {context}"])).toBe("duplicate");
  });

  it("says which placeholders were dropped or invented", () => {
    const dropped = check("Answer.");
    expect(dropped.ok === false && dropped.detail).toBe("dropped {question}, {context}");
    const invented = check("{question} {context} {user}");
    expect(invented.ok === false && invented.detail).toMatch(/introduced \{user\}/);
  });
});
