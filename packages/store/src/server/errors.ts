import {
  AglError,
  IllegalTransitionError,
  InvalidArgumentError,
  NotFoundError,
  redactSecrets,
  SpansEvictedError,
  StoreClosedError,
} from "@agl/core";
import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { ClientAbortedError } from "./body.js";
import type { StoreServerLogger } from "./logging.js";

/** The error body every non-2xx JSON answer carries (`field` names the offending input when known). */
export interface ErrorBody {
  detail: string;
  error_type: string;
  field?: string;
  errors?: ReadonlyArray<{ path: string; message: string }>;
}

/**
 * A request that does not match the route's schema (FastAPI's 422). Distinct from
 * InvalidArgumentError (400), which the reference uses for semantic guards such as a bad sort_by.
 */
export class RequestValidationError extends InvalidArgumentError {
  readonly status = 422;
  constructor(field: string, message: string, issues?: ReadonlyArray<{ path: string; message: string }>) {
    super(field, message, issues);
    this.name = "RequestValidationError";
  }
}

/** Validate a request part; failures become 422 naming the first failing field. */
export function parseRequest<S extends z.ZodType>(schema: S, value: unknown, what = ""): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: joinPath(what, issue.path),
    message: issue.message,
  }));
  const first = issues[0]!;
  throw new RequestValidationError(first.path, first.message, issues);
}

/** A 400 guard (bad sort field, limit 0, explicit null where not allowed...). */
export function badRequest(field: string, message: string): InvalidArgumentError {
  return new InvalidArgumentError(field, message);
}

function joinPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let out = prefix;
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else out = out ? `${out}.${String(p)}` : String(p);
  }
  return out;
}

/** Map an exception to status + body. Only errors that are not the caller's fault are 500. */
export function errorResponse(error: unknown): {
  status: ContentfulStatusCode;
  body: ErrorBody;
  internal: boolean;
} {
  if (error instanceof RequestValidationError) {
    return {
      status: 422,
      body: {
        detail: error.message,
        error_type: "ValidationError",
        field: error.field,
        errors: error.issues,
      },
      internal: false,
    };
  }
  if (NotFoundError.isInstance(error)) {
    return {
      status: 404,
      body: { detail: error.message, error_type: "NotFoundError", field: `${error.kind}_id` },
      internal: false,
    };
  }
  if (IllegalTransitionError.isInstance(error)) {
    return {
      status: 409,
      body: { detail: error.message, error_type: "IllegalTransitionError", field: "status" },
      internal: false,
    };
  }
  if (InvalidArgumentError.isInstance(error)) {
    return {
      status: 400,
      body: {
        detail: error.message,
        error_type: "InvalidArgumentError",
        field: error.field,
        errors: error.issues,
      },
      internal: false,
    };
  }
  if (SpansEvictedError.isInstance(error)) {
    // Gone for good (a memory store's span eviction): not a server fault, and not worth retrying.
    return { status: 410, body: { detail: error.message, error_type: "SpansEvictedError" }, internal: false };
  }
  if (StoreClosedError.isInstance(error)) {
    return { status: 503, body: { detail: error.message, error_type: "StoreClosedError" }, internal: false };
  }
  if (error instanceof HTTPException) {
    return {
      status: error.status as ContentfulStatusCode,
      body: { detail: error.message || httpReason(error.status), error_type: "HTTPException" },
      internal: false,
    };
  }
  const name = AglError.isInstance(error) || error instanceof Error ? error.name : "Error";
  return { status: 500, body: { detail: "Internal server error", error_type: name }, internal: true };
}

/** Log a request's failure: a client gone mid-upload at info, a server fault (internal) at error. */
export function logFailure(
  logger: StoreServerLogger,
  error: unknown,
  internal: boolean,
  errorType: string,
  method: string,
  path: string,
): void {
  if (ClientAbortedError.isInstance(error)) {
    // Nobody is left to answer; not a server fault either.
    logger.info("client aborted", { method, path });
  } else if (internal) {
    const e = error as Error;
    logger.error("unhandled error", {
      method,
      path,
      error_type: errorType,
      message: redactSecrets(e.message),
      stack: e.stack === undefined ? undefined : redactSecrets(e.stack),
    });
  }
}

function httpReason(status: number): string {
  switch (status) {
    case 401:
      return "Unauthorized";
    case 413:
      return "Request body too large";
    case 504:
      return "Request timed out";
    default:
      return `HTTP ${status}`;
  }
}

export function sendError(c: Context, error: unknown): Response {
  const { status, body } = errorResponse(error);
  return c.json(body, status);
}
