import type { z } from "zod";
import { InvalidArgumentError } from "./errors.js";
import type { LightningStore } from "./store/store.js";
import { parseOrThrow } from "./types/validate.js";

/**
 * Validate constructor options: an unknown key is an error naming it (a typo such as `nRunner` must not
 * be silently ignored), then the schema's own checks, each naming `<what>.<field>`.
 */
export function parseOptions<S extends z.ZodObject<any>>(
  schema: S,
  value: unknown,
  what: string,
): z.output<S> {
  if (value === undefined) value = {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(what, "must be an options object");
  }
  const known = new Set(Object.keys(schema.shape));
  for (const key of Object.keys(value)) {
    if (!known.has(key)) {
      throw new InvalidArgumentError(
        `${what}.${key}`,
        `unknown option "${key}" (known: ${[...known].join(", ")})`,
      );
    }
  }
  return parseOrThrow(schema, value, what);
}

const STORE_METHODS = ["dequeueRollout", "updateAttempt", "addManySpans", "getManySpanSequenceIds"] as const;

/** Structural check used by option schemas: anything implementing the store calls we rely on. */
export function isLightningStore(value: unknown): value is LightningStore {
  if (typeof value !== "object" || value === null) return false;
  return STORE_METHODS.every((m) => typeof (value as Record<string, unknown>)[m] === "function");
}
