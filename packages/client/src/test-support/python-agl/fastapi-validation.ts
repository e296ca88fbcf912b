/**
 * How FastAPI (with pydantic) turns a bad request into an answer, for the Python store stand-in
 * (store-server.ts): 422 `detail` lists for validation errors, 400 for nulls and page parameters
 * the Python routes refuse, and query strings read the way its `Depends()` reads them. Kept apart
 * so store-server.ts holds only the routes and the HTTP plumbing.
 */
import type { z } from "zod";
import * as M from "./models.js";

/** Thrown by a handler to answer with this status and body instead of its result. */
export class HttpAnswer {
  constructor(
    readonly status: number,
    readonly body: unknown,
  ) {}
}

function validationError(error: z.ZodError, where: "body" | "query"): HttpAnswer {
  return new HttpAnswer(422, {
    detail: error.issues.map((issue) => ({
      type: issue.code === "invalid_type" && issue.message.includes("undefined") ? "missing" : issue.code,
      loc: [where, ...issue.path],
      msg: issue.message.includes("received undefined") ? "Field required" : issue.message,
      input: null,
    })),
  });
}

export function parse<S extends z.ZodType>(
  schema: S,
  value: unknown,
  where: "body" | "query" = "body",
): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw validationError(result.error, where);
  return result.data;
}

export function requireKey(body: unknown, key: string): void {
  if (typeof body !== "object" || body === null || !(key in body)) {
    throw new HttpAnswer(422, {
      detail: [{ type: "missing", loc: ["body", key], msg: "Field required", input: body }],
    });
  }
}

/** `_get_mandatory_field_or_unset`: a key present with null is a 400. */
export function noNulls(body: Record<string, unknown>, keys: string[]): void {
  for (const key of keys) {
    if (key in body && body[key] === null) {
      throw new HttpAnswer(400, { detail: `${key} is invalid; it cannot be a null value.` });
    }
  }
}

/** `_validate_paginated_request`. */
export function checkPage(
  q: { sort_by?: string | null; limit: number; offset: number },
  model: z.ZodObject,
): void {
  const fields = M.fieldsOf(model);
  if (q.sort_by != null && !fields.includes(q.sort_by)) {
    throw new HttpAnswer(400, {
      detail: `Invalid sort_by: ${q.sort_by}, allowed fields are: ${fields.join(", ")}`,
    });
  }
  if (q.limit === 0 || (q.limit < 0 && q.limit !== -1)) {
    throw new HttpAnswer(400, { detail: "Limit must be greater than 0 or -1 for no limit" });
  }
  if (q.offset < 0) throw new HttpAnswer(400, { detail: "Offset must be greater than or equal to 0" });
}

/** Query parameters as FastAPI's `Depends()` reads them: repeated keys for lists, numbers coerced. */
export function queryObject(url: URL, lists: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of new Set(url.searchParams.keys())) {
    const values = url.searchParams.getAll(key);
    if (lists.includes(key)) out[key] = values;
    else if (["limit", "offset"].includes(key)) out[key] = Number(values[0]);
    else out[key] = values[0];
  }
  return out;
}
