import type { NamedResources, ResourcesUpdate } from "@agl/core";
import { diffLines } from "diff";

/** Shown instead of a secret. */
export const HIDDEN = "••••••";

const SECRET_KEY = /(^|_|-)(api[_-]?key|key|token|secret|password|passwd|authorization|credentials?)$/i;

/** True for keys that hold credentials (api_key, token, secret, password, authorization...). */
export function isSecretKey(key: string): boolean {
  return SECRET_KEY.test(key);
}

/**
 * A deep copy with every credential replaced by HIDDEN (null and "" stay visible: they are not secrets),
 * and credentials embedded in URLs (`https://user:pass@host`, `?api_key=...`) masked too.
 */
export function redactSecrets<T>(value: T): T {
  if (typeof value === "string") return redactUrl(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactSecrets(v)) as T;
  if (typeof value !== "object" || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    out[key] = isSecretKey(key) && v !== null && v !== "" ? HIDDEN : redactSecrets(v);
  }
  return out as T;
}

function redactUrl(text: string): string {
  return text
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/)([^/\s:@]+):([^/\s@]+)@/gi, `$1$2:${HIDDEN}@`)
    .replace(/([?&](?:api[_-]?key|key|token|access_token|secret)=)[^&#\s]+/gi, `$1${HIDDEN}`);
}

export interface ResourceEntry {
  name: string;
  type: string;
  /** What the version list shows: the endpoint and model of an LLM, the head of a template. */
  summary: string;
  /** The text compared between versions: the template of a prompt, the redacted JSON of the rest. */
  text: string;
}

export function resourceEntries(resources: NamedResources): ResourceEntry[] {
  return Object.entries(resources)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, raw]) => {
      const r = redactSecrets(raw) as Record<string, unknown>;
      const type = String(r.resource_type ?? "unknown");
      if (type === "prompt_template") {
        const template = String(r.template ?? "");
        return {
          name,
          type,
          summary: `${r.engine ?? "f-string"}: ${template.split("\n")[0]!.slice(0, 80)}`,
          text: template,
        };
      }
      return {
        name,
        type,
        summary: type.endsWith("llm") ? `${r.model ?? "?"} @ ${r.endpoint ?? "?"}` : type,
        text: JSON.stringify(r, null, 2),
      };
    });
}

export interface DiffLine {
  kind: "same" | "added" | "removed";
  text: string;
}

export interface ResourceDiff {
  name: string;
  change: "added" | "removed" | "changed" | "unchanged";
  lines: DiffLine[];
}

/** Per resource name, a line diff from `before` to `after` (secrets hidden on both sides). */
export function diffResources(before: ResourcesUpdate | null, after: ResourcesUpdate): ResourceDiff[] {
  const old = new Map((before ? resourceEntries(before.resources) : []).map((e) => [e.name, e]));
  const now = new Map(resourceEntries(after.resources).map((e) => [e.name, e]));
  const names = [...new Set([...old.keys(), ...now.keys()])].sort();
  return names.map((name): ResourceDiff => {
    const a = old.get(name)?.text;
    const b = now.get(name)?.text;
    const lines: DiffLine[] = [];
    for (const part of diffLines(a ?? "", b ?? "")) {
      const kind = part.added ? "added" : part.removed ? "removed" : "same";
      for (const text of part.value.replace(/\n$/, "").split("\n")) lines.push({ kind, text });
    }
    const change =
      a === undefined ? "added" : b === undefined ? "removed" : a === b ? "unchanged" : "changed";
    return { name, change, lines };
  });
}
