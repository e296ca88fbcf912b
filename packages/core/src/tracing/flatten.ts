import { InvalidArgumentError } from "../errors.js";

export type Primitive = string | number | boolean;
export type FlatAttributes = Record<string, Primitive>;

/** What to do with a leaf that is not a string, finite number or boolean. */
export type NonPrimitivePolicy = "reject" | "stringify";

const isPrimitive = (v: unknown): v is Primitive =>
  typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));

const isPlainContainer = (v: unknown): v is Record<string, unknown> | unknown[] => {
  if (Array.isArray(v)) return true;
  if (typeof v !== "object" || v === null) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};

/**
 * Flatten nested plain objects and arrays into dotted keys (`a.b.0.c`), as the reference emitters do.
 * A primitive at the top level is stored under `prefix` itself. Undefined leaves are skipped.
 * `reject` throws an InvalidArgumentError naming the offending dotted key; `stringify` stores JSON
 * (or `String(v)` when it has no JSON form).
 */
export function flattenAttributes(
  value: unknown,
  prefix: string,
  policy: NonPrimitivePolicy,
): FlatAttributes {
  const out: FlatAttributes = {};
  const visit = (v: unknown, key: string, seen: Set<unknown>): void => {
    if (v === undefined) return;
    if (isPrimitive(v)) {
      out[key] = v;
      return;
    }
    if (isPlainContainer(v)) {
      if (seen.has(v)) throw new InvalidArgumentError(key || "value", "contains a circular reference");
      seen.add(v);
      const entries = Array.isArray(v) ? v.map((x, i) => [String(i), x] as const) : Object.entries(v);
      for (const [k, child] of entries) visit(child, key ? `${key}.${k}` : k, seen);
      seen.delete(v);
      return;
    }
    if (policy === "reject") {
      throw new InvalidArgumentError(
        key || "value",
        `must be a string, finite number or boolean (got ${describe(v)})`,
      );
    }
    out[key || "value"] = stringify(v);
  };
  visit(value, prefix, new Set());
  return out;
}

/** JSON for anything JSON can carry, `String(v)` otherwise (functions, symbols, bigint). */
export function stringify(v: unknown): string {
  if (typeof v === "bigint") return v.toString();
  if (v instanceof Error) return JSON.stringify({ name: v.name, message: v.message });
  try {
    const text = JSON.stringify(v);
    return text === undefined ? String(v) : text;
  } catch {
    return String(v);
  }
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (typeof v === "number") return String(v);
  if (typeof v === "object") return (v as object).constructor?.name ?? "object";
  return typeof v;
}
