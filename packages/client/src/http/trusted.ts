/**
 * Shape checks for answers of an agl store server on the client's hot routes. That server builds
 * every answer from objects its store validated and completed (defaults filled), so the client
 * checks the shape and the identifying fields instead of re-running the full zod schema; anything
 * off still fails with an InvalidArgumentError naming the field.
 */
import { InvalidArgumentError } from "@agl/core";

/** Set by the agl store server on every answer; other servers (Python Agent Lightning) lack it. */
export const AGL_SERVER_HEADER = "x-agl-server";

export type Shape<T> = (body: unknown, what: string) => T;

const REQUIRED_TYPES: Record<string, "string" | "number" | "object"> = {
  rollout_id: "string",
  attempt_id: "string",
  span_id: "string",
  status: "string",
  sequence_id: "number",
  attempt: "object",
  sequence_ids: "object",
};

function checkObject(value: unknown, keys: readonly string[], where: string): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new InvalidArgumentError(where, "expected an object");
  }
  const record = value as Record<string, unknown>;
  for (const key of keys) {
    const v = record[key];
    const type = REQUIRED_TYPES[key] ?? "string";
    if (typeof v !== type || v === null) {
      throw new InvalidArgumentError(where ? `${where}.${key}` : key, `expected a ${type}`);
    }
  }
}

export function trustedObject<T>(keys: readonly string[]): Shape<T> {
  return (body, what) => {
    checkObject(body, keys, what);
    return body as T;
  };
}

export function trustedArray<T>(keys: readonly string[]): Shape<T[]> {
  return (body, what) => {
    if (!Array.isArray(body)) throw new InvalidArgumentError(what, "expected a list");
    for (let i = 0; i < body.length; i++) checkObject(body[i], keys, `${what}[${i}]`);
    return body as T[];
  };
}
