import { z } from "zod";
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

/**
 * An http(s) URL option. A value without a scheme (`127.0.0.1:4747`, `localhost:4747`) is the common
 * slip: the message shows the fix instead of letting every later call fail.
 */
export function httpUrl(what = "URL") {
  return z.string().superRefine((value, ctx) => {
    const problem = httpUrlProblem(value, what);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
}

/** Why `value` is not a usable http(s) URL, or null when it is. */
export function httpUrlProblem(value: string, what = "URL"): string | null {
  let parsed: URL | undefined;
  try {
    parsed = new URL(value);
  } catch {
    parsed = undefined;
  }
  if (parsed && (parsed.protocol === "http:" || parsed.protocol === "https:") && parsed.host !== "")
    return null;
  if (/^[\w.-]+:\d+(\/|$)/.test(value) || !value.includes("://")) {
    return `${what} ${JSON.stringify(value)} has no http:// or https:// scheme; did you mean "http://${value}"?`;
  }
  return `${what} ${JSON.stringify(value)} is not an http(s) URL`;
}
