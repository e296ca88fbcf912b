import type { z } from "zod";
import { InvalidArgumentError } from "../errors.js";

/**
 * Parse `value` with `schema`, throwing an {@link InvalidArgumentError} whose `field` is the
 * dotted path of the first failing field, prefixed by `what` (e.g. "rollout.config.max_attempts").
 */
export function parseOrThrow<S extends z.ZodType>(schema: S, value: unknown, what = ""): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: joinPath(what, issue.path),
    message: issue.message,
  }));
  const first = issues[0]!;
  throw new InvalidArgumentError(first.path, first.message, issues);
}

function joinPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  const parts = path.map((p) => (typeof p === "number" ? `[${p}]` : String(p)));
  let out = prefix;
  for (const part of parts) {
    if (part.startsWith("[")) out += part;
    else out = out ? `${out}.${part}` : part;
  }
  return out;
}
