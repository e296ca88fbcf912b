import type { PromptTemplate } from "@agl/core";

/** Why an edit's output was not accepted as a new prompt version. */
export type CandidateRejection =
  | "no_prompt"
  | "empty_prompt"
  | "huge_prompt"
  | "invalid_template"
  | "missing_variables"
  | "unknown_variables"
  | "duplicate";

export type TemplateEngine = PromptTemplate["engine"];

/**
 * The placeholder names of a template, in order of first use, or null when the template cannot be parsed.
 * f-string: `{name}` with `{{`/`}}` escapes; a lone brace or an empty/complex field is invalid. jinja: the
 * variable a `{{ ... }}` expression starts with. poml: nothing is checked (null means "cannot tell").
 */
export function templateVariables(template: string, engine: TemplateEngine): string[] | null {
  if (engine === "f-string") return fStringVariables(template);
  if (engine === "jinja") {
    const names: string[] = [];
    for (const m of template.matchAll(/\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)/g)) {
      if (!names.includes(m[1]!)) names.push(m[1]!);
    }
    return names;
  }
  return null;
}

function fStringVariables(template: string): string[] | null {
  const names: string[] = [];
  let i = 0;
  while (i < template.length) {
    const ch = template[i]!;
    if (ch === "{") {
      if (template[i + 1] === "{") {
        i += 2;
        continue;
      }
      const close = template.indexOf("}", i + 1);
      if (close < 0) return null;
      const name = template.slice(i + 1, close).trim();
      // Only plain identifiers: a JSON example such as {"a": 1} left unescaped would break formatting.
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return null;
      if (!names.includes(name)) names.push(name);
      i = close + 1;
      continue;
    }
    if (ch === "}") {
      if (template[i + 1] === "}") {
        i += 2;
        continue;
      }
      return null;
    }
    i++;
  }
  return names;
}

/**
 * The prompt inside an edit model's reply: the text between `<prompt>` tags when present, else the body
 * of a single fenced code block when the whole reply is one, else the trimmed reply. Null for no text.
 */
export function extractPrompt(reply: string | null | undefined): string | null {
  if (reply === null || reply === undefined) return null;
  const tagged = /<prompt>\s*([\s\S]*?)\s*<\/prompt>/i.exec(reply);
  if (tagged) return tagged[1]!;
  const trimmed = reply.trim();
  const fenced = /^```[\w-]*\n([\s\S]*?)\n?```$/.exec(trimmed);
  if (fenced) return fenced[1]!.trim();
  return trimmed;
}

export interface CandidateCheck {
  /** The variables every version must keep (the seed's). */
  requiredVariables: readonly string[];
  engine: TemplateEngine;
  maxPromptChars: number;
  /** Templates already in the run; an identical candidate adds nothing. */
  existing: ReadonlySet<string>;
}

export type CandidateVerdict =
  | { ok: true; template: string }
  | { ok: false; reason: CandidateRejection; detail: string };

/** Accept an edit's prompt only if it is usable by the agent exactly as the seed was. */
export function checkCandidate(prompt: string | null, check: CandidateCheck): CandidateVerdict {
  if (prompt === null) return { ok: false, reason: "no_prompt", detail: "the edit model returned no text" };
  if (prompt.trim() === "")
    return { ok: false, reason: "empty_prompt", detail: "the edit model returned an empty prompt" };
  if (prompt.length > check.maxPromptChars) {
    return {
      ok: false,
      reason: "huge_prompt",
      detail: `${prompt.length} characters, over the limit of ${check.maxPromptChars}`,
    };
  }
  const variables = templateVariables(prompt, check.engine);
  if (variables === null && check.engine === "f-string") {
    return {
      ok: false,
      reason: "invalid_template",
      detail: "unbalanced or non-identifier braces (literal braces must be written {{ and }})",
    };
  }
  if (variables !== null) {
    const missing = check.requiredVariables.filter((v) => !variables.includes(v));
    if (missing.length > 0) {
      return {
        ok: false,
        reason: "missing_variables",
        detail: `dropped ${missing.map((v) => `{${v}}`).join(", ")}`,
      };
    }
    const unknown = variables.filter((v) => !check.requiredVariables.includes(v));
    if (unknown.length > 0) {
      return {
        ok: false,
        reason: "unknown_variables",
        detail: `introduced ${unknown.map((v) => `{${v}}`).join(", ")}, which the agent cannot fill`,
      };
    }
  }
  if (check.existing.has(prompt))
    return { ok: false, reason: "duplicate", detail: "identical to an existing version" };
  return { ok: true, template: prompt };
}
