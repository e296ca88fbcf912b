import type { Attributes, AttributeValue } from "@agl/core";
import { parsePythonLiteral } from "./python-literal.js";

/**
 * Attribute helpers. Spans arrive flattened (`gen_ai.prompt.0.role`) from OTel SDKs and sometimes
 * nested (`{gen_ai: {prompt: [...]}}`) from OTLP ingest; readers work on the flat form.
 */

function isPlainObject(value: unknown): value is Record<string, AttributeValue> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Flat dotted keys. Returns the input itself when nothing is nested (the common, fast case). */
export function flattenAttributes(attributes: Attributes | null | undefined): Attributes {
  if (!attributes) return {};
  let nested = false;
  for (const key in attributes) {
    if (isPlainObject(attributes[key])) {
      nested = true;
      break;
    }
  }
  if (!nested) return attributes;
  const out: Attributes = {};
  const walk = (prefix: string, value: AttributeValue) => {
    if (isPlainObject(value)) {
      for (const k in value) walk(prefix ? `${prefix}.${k}` : k, value[k]!);
    } else out[prefix] = value;
  };
  for (const key in attributes) walk(key, attributes[key]!);
  return out;
}

/**
 * Keys grouped by their first two dotted segments ("gen_ai.prompt.0.role" → "gen_ai.prompt"), built
 * once per attributes object: readers probe many prefixes per span, and scanning every key for each
 * probe dominated the adapter's run time.
 */
const prefixIndexCache = new WeakMap<object, Map<string, string[]>>();
function prefixIndex(attributes: Attributes): Map<string, string[]> {
  let index = prefixIndexCache.get(attributes);
  if (index) return index;
  index = new Map();
  for (const key in attributes) {
    const first = key.indexOf(".");
    const second = first < 0 ? -1 : key.indexOf(".", first + 1);
    const head = second < 0 ? key : key.slice(0, second);
    const list = index.get(head);
    if (list) list.push(key);
    else index.set(head, [key]);
  }
  prefixIndexCache.set(attributes, index);
  return index;
}

const NO_KEYS: string[] = [];

/** Keys that start with `prefix.` (in insertion order). Callers must not modify the result. */
export function keysUnder(attributes: Attributes, prefix: string): string[] {
  const first = prefix.indexOf(".");
  const second = first < 0 ? -1 : prefix.indexOf(".", first + 1);
  const dotted = `${prefix}.`;
  if (first < 0) {
    // one-segment prefix: every group whose head starts with it
    const out: string[] = [];
    for (const [head, keys] of prefixIndex(attributes)) {
      if (head === prefix || head.startsWith(dotted))
        for (const k of keys) if (k.startsWith(dotted)) out.push(k);
    }
    return out;
  }
  const head = second < 0 ? prefix : prefix.slice(0, second);
  const keys = prefixIndex(attributes).get(head);
  if (!keys) return NO_KEYS;
  if (second < 0) {
    // the group is exactly this prefix's keys unless the bare prefix itself is a key
    return keys.includes(prefix) ? keys.filter((k) => k !== prefix) : keys;
  }
  return keys.filter((k) => k.startsWith(dotted));
}

/**
 * Rebuild the structure under `prefix` (`gen_ai.prompt` → `[{role, content}, ...]`): containers whose
 * keys are integers become arrays ordered by index (holes dropped). Returns undefined when no key has
 * the prefix.
 */
export function unflattenPrefix(attributes: Attributes, prefix: string): unknown {
  const keys = keysUnder(attributes, prefix);
  if (keys.length === 0) return undefined;
  const start = prefix.length + 1;
  const root: { v: unknown } = { v: undefined };
  let holes = false;
  for (const key of keys) {
    let parent: any = root;
    let slot: string | number = "v";
    // walk the dotted segments after the prefix without allocating a split array
    let from = start;
    while (from <= key.length) {
      let dot = key.indexOf(".", from);
      if (dot < 0) dot = key.length;
      const part = key.slice(from, dot);
      from = dot + 1;
      const index = isIndex(part) ? Number(part) : -1;
      let container: any = parent[slot];
      if (container === undefined || container === null || typeof container !== "object") {
        container = index >= 0 ? [] : {};
        parent[slot] = container;
      } else if (Array.isArray(container) && index < 0) {
        container = Object.assign({}, container);
        parent[slot] = container;
      }
      if (Array.isArray(container) && index > container.length) holes = true;
      parent = container;
      slot = index >= 0 && Array.isArray(container) ? index : part;
    }
    parent[slot] = attributes[key];
  }
  return holes ? compact(root.v) : root.v;
}

function isIndex(part: string): boolean {
  if (part.length === 0 || part.length > 9) return false;
  for (let i = 0; i < part.length; i++) {
    const c = part.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

/** Drop array holes left by non-contiguous indices (`x.0`, `x.2`). */
function compact(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((_, i) => i in value).map(compact);
  if (isPlainObject(value)) {
    for (const k of Object.keys(value))
      (value as Record<string, unknown>)[k] = compact(value[k]) as AttributeValue;
  }
  return value;
}

/** True when any key starts with `prefix.`. */
export function hasPrefix(attributes: Attributes, prefix: string): boolean {
  return keysUnder(attributes, prefix).length > 0;
}

/** Keys under `prefix.` minus those whose remainder starts with one of `excluded`, unflattened. */
export function groupWithout(
  attributes: Attributes,
  prefix: string,
  excluded: string[],
): Record<string, unknown> {
  const dotted = `${prefix}.`;
  const subset: Attributes = {};
  for (const key of keysUnder(attributes, prefix)) {
    const rest = key.slice(dotted.length);
    if (excluded.some((e) => rest === e || rest.startsWith(`${e}.`))) continue;
    subset[key] = attributes[key]!;
  }
  const value = unflattenPrefix(subset, prefix);
  return isPlainObject(value) ? (value as Record<string, unknown>) : {};
}

/** JSON text → value; anything else (or invalid JSON) is returned unchanged. */
export function maybeJson(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const t = value.trimStart();
  if (!(t.startsWith("{") || t.startsWith("["))) return value;
  try {
    return JSON.parse(value);
  } catch {
    return value;
  }
}

/** A JSON or Python-literal string (LiteLLM stringifies dicts with `str()`), or the value itself. */
export function parseLiteral(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const parsed = maybeJson(value);
  if (parsed !== value) return parsed;
  const t = value.trimStart();
  if (!(t.startsWith("{") || t.startsWith("[") || t.startsWith("("))) return value;
  try {
    return parsePythonLiteral(value);
  } catch {
    return value;
  }
}

/** A list of integers (possibly serialized), else null. */
export function asTokenIds(value: unknown): number[] | null {
  const v = parseLiteral(value);
  if (!Array.isArray(v)) return null;
  for (const x of v) if (typeof x !== "number" || !Number.isInteger(x)) return null;
  return v as number[];
}

export function asString(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

export function asNumber(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value)) return value;
  if (typeof value === "string" && value.trim() !== "" && Number.isFinite(Number(value)))
    return Number(value);
  return null;
}

export function firstString(attributes: Attributes, ...keys: string[]): string | null {
  for (const key of keys) {
    const v = attributes[key];
    if (typeof v === "string" && v !== "") return v;
  }
  return null;
}

export function firstNumber(attributes: Attributes, ...keys: string[]): number | null {
  for (const key of keys) {
    const v = asNumber(attributes[key]);
    if (v !== null) return v;
  }
  return null;
}
