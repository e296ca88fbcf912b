/**
 * Spans are stored, not refused, when their text is something PostgreSQL or strict UTF-8 JSON cannot
 * hold as is. Agents legitimately produce such text (tool output, model text with a NUL, a string cut
 * in the middle of a surrogate pair), and other Agent Lightning servers store it, so refusing the span
 * would lose it — and with a batched OTLP exporter, every other span of the same request with it.
 *
 * The encoding, identical on every backend:
 * - every U+0000 and every lone UTF-16 surrogate, in any string value or object key anywhere in the
 *   span (name, status, attributes, events, links, context, parent, resource, unknown fields), becomes
 *   U+FFFD REPLACEMENT CHARACTER;
 * - a key that, once replaced, equals a key already in its object gets more U+FFFD appended until it
 *   is unique, so no value is overwritten;
 * - the span gets the attribute `agl.sanitized = true` (a span whose text needed nothing is unchanged).
 *
 * What cannot be rewritten without changing what the span means is still refused: a rollout or attempt
 * id that is not a valid id, an out-of-range sequence id, nesting deeper than the input rules allow.
 */
import { z } from "zod";
import { MAX_NESTING_DEPTH } from "../types/input-rules.js";
import { type Span, SpanSchema } from "../types/span.js";
import { parseOrThrow } from "../types/validate.js";
import { isCanonicalSpan } from "./span-input.js";

/** Set to `true` on a span whose text was rewritten (see the module comment for the encoding). */
export const SANITIZED_ATTRIBUTE = "agl.sanitized";
/** What replaces U+0000 and lone surrogates. */
export const REPLACEMENT_CHARACTER = "\uFFFD";

type WellFormedString = { isWellFormed(): boolean; toWellFormed(): string };

/** `s` with U+0000 and lone surrogates replaced by U+FFFD; `s` itself when it has neither. */
export function sanitizeText(s: string): string {
  const wf = s as unknown as WellFormedString;
  const wellFormed = wf.isWellFormed();
  if (wellFormed && !s.includes("\u0000")) return s;
  return (wellFormed ? s : wf.toWellFormed()).replaceAll("\u0000", REPLACEMENT_CHARACTER);
}

// A span's deepest legal value: an event's or link's attributes (depth 4) nesting MAX_NESTING_DEPTH
// levels. Anything deeper is refused by the input rules anyway, so the walk stops there (and a hostile
// depth cannot overflow the stack).
const MAX_WALK_DEPTH = MAX_NESTING_DEPTH + 4;

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/** `value` with its text sanitised; the same reference when nothing needed it (copy on write). */
function clean(value: unknown, depth: number): unknown {
  if (typeof value === "string") return sanitizeText(value);
  if (depth > MAX_WALK_DEPTH) return value;
  if (Array.isArray(value)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const item = clean(value[i], depth + 1);
      if (item !== value[i]) {
        out ??= value.slice();
        out[i] = item;
      }
    }
    return out ?? value;
  }
  if (!isPlainObject(value)) return value;
  return cleanObject(value, depth);
}

function cleanObject(obj: Record<string, unknown>, depth: number): Record<string, unknown> {
  const keys = Object.keys(obj);
  // Allocates nothing more while everything is clean (the common case: this runs on every span).
  let values: unknown[] | null = null;
  let keysChanged = false;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const v = clean(obj[key], depth + 1);
    if (v !== obj[key]) {
      values ??= keys.map((k) => obj[k]);
      values[i] = v;
    }
    if (!keysChanged && sanitizeText(key) !== key) keysChanged = true;
  }
  if (values === null && !keysChanged) return obj;
  const cleaned = values ?? keys.map((k) => obj[k]);
  // Keys that were fine keep their names; rewritten ones take the next free name. Object.fromEntries
  // defines properties, so a key such as "__proto__" stays an ordinary key.
  const taken = new Set(keys.filter((key) => sanitizeText(key) === key));
  const entries: Array<[string, unknown]> = [];
  keys.forEach((key, i) => {
    let name = sanitizeText(key);
    if (name !== key) {
      while (taken.has(name)) name += REPLACEMENT_CHARACTER;
      taken.add(name);
    }
    entries.push([name, cleaned[i]]);
  });
  return Object.fromEntries(entries);
}

/**
 * A span input with its text made storable (see the module comment) and marked `agl.sanitized`, or
 * `span` itself when it needed nothing. The rollout and attempt ids are left alone: they are refused,
 * not rewritten, when invalid. Anything that is not a plain object is returned as is (validation
 * reports it).
 */
export function sanitizeSpanInput(span: unknown): unknown {
  if (!isPlainObject(span)) return span;
  const cleaned = cleanObject(span, 1);
  if (cleaned === span) return span;
  // Ids were never rewritten: put the originals back (a bad id must still be refused by name).
  for (const id of ["rollout_id", "attempt_id"] as const) {
    if (id in span) cleaned[id] = span[id];
  }
  const attributes = cleaned.attributes;
  if (attributes === undefined) cleaned.attributes = { [SANITIZED_ATTRIBUTE]: true };
  else if (isPlainObject(attributes)) cleaned.attributes = { ...attributes, [SANITIZED_ATTRIBUTE]: true };
  return cleaned;
}

/** True when the span carries the `agl.sanitized` mark. */
export const wasSanitized = (span: { attributes?: unknown }): boolean =>
  isPlainObject(span.attributes) && span.attributes[SANITIZED_ATTRIBUTE] === true;

/**
 * SpanSchema after sanitising: what every store and the server's span routes parse span inputs with,
 * so text no backend can hold is rewritten the same way everywhere instead of refused.
 */
export const SanitizingSpanSchema = z.preprocess(sanitizeSpanInput, SpanSchema);

/**
 * Validate one span input for storing: a complete, storable span skips zod (span-input.ts); anything
 * else is sanitised, then parsed (defaults filled, errors naming the field).
 */
export function parseSpanInput(span: unknown, field: string): Span {
  return isCanonicalSpan(span) ? { ...span } : parseOrThrow(SanitizingSpanSchema, span, field);
}

/** {@link parseSpanInput} over a list; the first invalid span fails the whole list. */
export function parseSpanInputs(spans: unknown, field: string): Span[] {
  if (!Array.isArray(spans)) return parseOrThrow(z.array(SanitizingSpanSchema), spans, field);
  let all = true;
  for (let i = 0; i < spans.length && all; i++) all = isCanonicalSpan(spans[i]);
  if (all) return (spans as Span[]).map((s) => ({ ...s }));
  return parseOrThrow(z.array(SanitizingSpanSchema), spans, field);
}
