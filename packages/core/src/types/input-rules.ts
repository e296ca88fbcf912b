/**
 * The input rules every store enforces, whatever its backend: what a string may contain, how deep and
 * how large a JSON value may be, the syntax of ids and the range of integers. They are part of the zod
 * schemas (so a violation is an InvalidArgumentError / HTTP 4xx naming the field), and they are the
 * strictest of the backends' own limits, so a value one store accepts every store can hold:
 *
 * - PostgreSQL cannot store U+0000 in text or jsonb, and rejects (or, through its UTF-8 encoding,
 *   silently replaces) lone UTF-16 surrogates: strings, object keys included, may contain neither.
 * - PostgreSQL columns are 32-bit integers and SQLite loses precision above 2^53 - 1: integers that
 *   reach a column stay well inside int32; the span sequence ids a store hands out obey the same
 *   maximum as the ones callers give (MAX_SPAN_SEQUENCE_ID).
 * - `.` and `..` are rewritten by URL normalisation, so no id may be one; ids have no control
 *   characters and a bounded length.
 * - Deep nesting overflows recursive walkers (and PostgreSQL's JSON parser): values nest at most
 *   {@link MAX_NESTING_DEPTH} levels.
 */
import { z } from "zod";

/** Longest id (rollout, attempt, resources, worker, span, trace) in UTF-16 code units. */
export const MAX_ID_LENGTH = 512;
/** Deepest nesting of objects and arrays inside one JSON field (input, metadata, attributes...). */
export const MAX_NESTING_DEPTH = 64;
/** Largest JSON field (input, metadata, attributes...) by a fast size estimate (string lengths + 8 per item). */
export const MAX_VALUE_BYTES = 64 * 1024 * 1024;
/**
 * Largest span sequence_id, given by a caller or handed out by a store. Stores never hand out more: once
 * a rollout's counter reaches it (in practice only when a caller gave this id explicitly, as no rollout
 * allocates 2^30 ids), every later id is MAX_SPAN_SEQUENCE_ID itself. Sequence ids are an ordering hint
 * (spans are keyed by span_id, not by sequence_id), so the spans keep being stored and only lose their
 * relative order at the top; a rollout is never stopped by its own counter.
 */
export const MAX_SPAN_SEQUENCE_ID = 2 ** 30;
/** A sequence counter's next value as handed out: at most MAX_SPAN_SEQUENCE_ID (see there). */
export function capSequenceId(value: number): number {
  return Math.min(value, MAX_SPAN_SEQUENCE_ID);
}

/** Largest integer any store keeps in an integer column (PostgreSQL INTEGER). */
export const MAX_STORED_INT = 2 ** 31 - 1;
/** Most rollouts one dequeue call may claim. */
export const MAX_DEQUEUE_LIMIT = 1000;
/**
 * Most rollouts one enqueueManyRollouts call (POST /queues/rollouts/enqueue) may create: one call is
 * one transaction and one answer, both held in memory whole.
 */
export const MAX_ENQUEUE_BATCH = 10_000;
/** Most ids one call may name (waits, id filters, sequence-id pairs). */
export const MAX_IDS_PER_CALL = 10_000;

const isWellFormed = (s: string): boolean => (s as unknown as { isWellFormed(): boolean }).isWellFormed();

/** Why `s` cannot be stored by every backend, or null when it can. */
export function unstorableString(s: string): string | null {
  if (s.includes("\u0000")) return "must not contain the NUL character (U+0000)";
  if (!isWellFormed(s)) return "must be well-formed Unicode (it contains a lone UTF-16 surrogate)";
  return null;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Why `s` is not a valid id, or null when it is. */
export function invalidId(s: string): string | null {
  if (s.length === 0) return "must not be empty";
  if (s.length > MAX_ID_LENGTH) return `must be at most ${MAX_ID_LENGTH} characters`;
  if (s === "." || s === "..") return 'must not be "." or ".." (URL normalisation rewrites them)';
  if (CONTROL.test(s)) return "must not contain control characters";
  if (!isWellFormed(s)) return "must be well-formed Unicode (it contains a lone UTF-16 surrogate)";
  return null;
}

export interface Unstorable {
  /** Path below the checked value (object keys and array indexes). */
  path: Array<string | number>;
  message: string;
}

/**
 * The first part of a JSON-like value no store can keep (a bad string or key, nesting deeper than
 * {@link MAX_NESTING_DEPTH}, more than {@link MAX_VALUE_BYTES}), or null. Iterative: a hostile depth
 * cannot overflow the stack. Shared references are walked once per reference; cycles end at the
 * depth limit.
 */
export function findUnstorable(value: unknown, maxDepth = MAX_NESTING_DEPTH): Unstorable | null {
  if (typeof value === "string") {
    const problem = unstorableString(value);
    return problem ? { path: [], message: problem } : null;
  }
  if (typeof value !== "object" || value === null) return null;
  let size = 0;
  // Each entry: the container, its depth, and the path to it (built only when reporting).
  const stack: Array<{ v: object; depth: number; parent: number; key: string | number }> = [
    { v: value, depth: 1, parent: -1, key: "" },
  ];
  const visited: typeof stack = [];
  const pathOf = (index: number, last?: string | number): Array<string | number> => {
    const path: Array<string | number> = last === undefined ? [] : [last];
    for (let i = index; i > 0; i = visited[i]!.parent) path.unshift(visited[i]!.key);
    return path;
  };
  while (stack.length > 0) {
    const entry = stack.pop()!;
    const index = visited.push(entry) - 1;
    if (entry.depth > maxDepth) {
      return { path: pathOf(index), message: `must not nest deeper than ${maxDepth} levels` };
    }
    const v = entry.v;
    const isArray = Array.isArray(v);
    const keys = isArray ? null : Object.keys(v);
    const n = isArray ? (v as unknown[]).length : keys!.length;
    for (let i = 0; i < n; i++) {
      const key: string | number = isArray ? i : keys![i]!;
      if (!isArray) {
        const problem = unstorableString(key as string);
        if (problem) return { path: pathOf(index, key), message: `key ${problem}` };
        size += (key as string).length;
      }
      const item = (v as Record<string | number, unknown>)[key];
      size += 8;
      if (typeof item === "string") {
        size += item.length;
        const problem = unstorableString(item);
        if (problem) return { path: pathOf(index, key), message: problem };
      } else if (typeof item === "object" && item !== null) {
        stack.push({ v: item, depth: entry.depth + 1, parent: index, key });
      }
    }
    if (size > MAX_VALUE_BYTES) {
      return { path: pathOf(index), message: `must be at most ${MAX_VALUE_BYTES} bytes` };
    }
  }
  return null;
}

function refineStorable(value: unknown, ctx: z.RefinementCtx): void {
  const problem = findUnstorable(value);
  if (problem) ctx.addIssue({ code: "custom", path: problem.path, message: problem.message });
}

/** `schema`, whose whole value must also be storable (see {@link findUnstorable}). */
export const storable = <S extends z.ZodType>(schema: S) => schema.superRefine(refineStorable);

/** A string every backend can store. */
export const StorableStringSchema = z.string().superRefine((s, ctx) => {
  const problem = unstorableString(s);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/** An id: 1..MAX_ID_LENGTH characters, no control characters, not "." or "..", well-formed Unicode. */
export const IdStringSchema = z.string().superRefine((s, ctx) => {
  const problem = invalidId(s);
  if (problem) ctx.addIssue({ code: "custom", message: problem });
});

/** Any JSON-like value every backend can store (rollout input, resource payloads...). */
export const StorableJsonSchema = storable(z.any());

/** A JSON object with storable keys and values (metadata, attributes, heartbeat stats). */
export const StorableRecordSchema = storable(z.record(z.string(), z.any()));

/** An integer that fits every store's integer columns. */
export const StoredIntSchema = z.number().int().min(-MAX_STORED_INT).max(MAX_STORED_INT);
