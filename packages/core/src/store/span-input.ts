/**
 * A fast structural check for the common span input: every field present and well-typed, as tracers and
 * the LLM proxy build them. For such a span `SpanSchema.parse` would apply no default and change nothing,
 * so a store may skip zod (about 20 µs per span with a few dozen attributes, the largest cost of writing
 * one). Anything else (a missing field that takes a default, a wrong type) returns false and goes
 * through `SpanSchema`, which gives the error naming the field. The check must never accept what
 * `SpanSchema` rejects: `span-input.test.ts` compares the two.
 */
import { findUnstorable, invalidId, MAX_NESTING_DEPTH, MAX_SPAN_SEQUENCE_ID } from "../types/input-rules.js";
import { type Span, StatusCodeSchema } from "../types/span.js";

const STATUS_CODES: ReadonlySet<unknown> = new Set(StatusCodeSchema.options);

const isPlainObject = (v: unknown): v is Record<string, unknown> => {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};
const isStr = (v: unknown): v is string => typeof v === "string";
const isStrOrNull = (v: unknown) => v === null || typeof v === "string";
const isNumOrNull = (v: unknown) => v === null || (typeof v === "number" && Number.isFinite(v));

function isContext(v: unknown): boolean {
  if (!isPlainObject(v)) return false;
  if (!isStr(v.trace_id) || !isStr(v.span_id) || typeof v.is_remote !== "boolean") return false;
  const state = v.trace_state;
  if (!isPlainObject(state)) return false;
  for (const key in state) if (!isStr(state[key])) return false;
  return true;
}

function isEvent(v: unknown): boolean {
  return isPlainObject(v) && isStr(v.name) && isPlainObject(v.attributes) && isNumOrNull(v.timestamp);
}

function isLink(v: unknown): boolean {
  return isPlainObject(v) && isContext(v.context) && (v.attributes === null || isPlainObject(v.attributes));
}

/** Unlike Array.prototype.every, holes count (as undefined, which zod rejects). */
function everyItem(v: unknown, check: (x: unknown) => boolean): boolean {
  if (!Array.isArray(v)) return false;
  for (let i = 0; i < v.length; i++) if (!check(v[i])) return false;
  return true;
}

/** True when `v` is a complete, valid span that `SpanSchema` would return unchanged. */
export function isCanonicalSpan(v: unknown): v is Span {
  if (!isPlainObject(v)) return false;
  if (!isStr(v.rollout_id) || !isStr(v.attempt_id) || !isStr(v.trace_id) || !isStr(v.span_id)) return false;
  if (!Number.isSafeInteger(v.sequence_id) || !isStr(v.name) || !isStrOrNull(v.parent_id)) return false;
  if ((v.sequence_id as number) < 0 || (v.sequence_id as number) > MAX_SPAN_SEQUENCE_ID) return false;
  if (invalidId(v.rollout_id) !== null || invalidId(v.attempt_id) !== null) return false;
  const status = v.status;
  if (!isPlainObject(status) || !STATUS_CODES.has(status.status_code) || !isStrOrNull(status.description))
    return false;
  if (!isPlainObject(v.attributes) || !isNumOrNull(v.start_time) || !isNumOrNull(v.end_time)) return false;
  if (!everyItem(v.events, isEvent) || !everyItem(v.links, isLink)) return false;
  if (v.context !== null && !isContext(v.context)) return false;
  if (v.parent !== null && !isContext(v.parent)) return false;
  const resource = v.resource;
  if (!isPlainObject(resource) || !isPlainObject(resource.attributes) || !isStr(resource.schema_url))
    return false;
  // The input rules over the whole span: one level deeper than each field's own limit (stricter, never laxer).
  return findUnstorable(v, MAX_NESTING_DEPTH + 1) === null;
}

/** True when `v` is an array of complete, valid spans (see {@link isCanonicalSpan}). */
export const areCanonicalSpans = (v: unknown): v is Span[] => everyItem(v, isCanonicalSpan);
