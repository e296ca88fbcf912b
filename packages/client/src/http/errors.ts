/**
 * Errors from talking to a store server. Every one is an HttpError (marker + isInstance, like the core
 * errors); 404/409/410/400/422 answers are ALSO the matching core error, so `NotFoundError.isInstance(e)`
 * works the same against a remote store as against an in-process one.
 */
import {
  AglError,
  type EntityKind,
  IllegalTransitionError,
  InvalidArgumentError,
  NotFoundError,
  SpansEvictedError,
} from "@agl/core";

const HTTP_MARKER = Symbol.for("agl.error.HttpError");

/** What the server said: its JSON error body (`{detail, error_type, field?}`), when it sent one. */
export interface ServerErrorInfo {
  status: number;
  detail: string;
  errorType: string | null;
  field: string | null;
  method: string;
  url: string;
}

export interface HttpErrorFields {
  readonly status: number;
  readonly detail: string;
  readonly errorType: string | null;
  readonly field: string | null;
  readonly method: string;
  readonly url: string;
}

function markHttp(target: object, info: ServerErrorInfo): void {
  Object.defineProperty(target, HTTP_MARKER, { value: true });
  Object.assign(target, {
    status: info.status,
    detail: info.detail,
    errorType: info.errorType,
    field: info.field,
    method: info.method,
    url: info.url,
  });
}

type ErrorClass = abstract new (...args: any[]) => Error;

/**
 * A core error class that also carries the HTTP details (`markHttp` sets them), so a remote error is both
 * the core error (`NotFoundError.isInstance`) and an `HttpErrorFields`.
 */
function withHttpFields<B extends ErrorClass>(Base: B) {
  abstract class WithHttpFields extends Base implements HttpErrorFields {
    declare readonly status: number;
    declare readonly detail: string;
    declare readonly errorType: string | null;
    declare readonly field: string | null;
    declare readonly method: string;
    declare readonly url: string;
  }
  return WithHttpFields;
}

/** Any failed HTTP exchange with the store server. `status` is 0 when no response arrived. */
export class HttpError extends withHttpFields(AglError) {
  constructor(info: ServerErrorInfo, options?: { cause?: unknown }) {
    super(`${info.method} ${info.url} → ${info.status || "no response"}: ${info.detail}`, options);
    this.name = "HttpError";
    markHttp(this, info);
  }

  static override isInstance(error: unknown): error is AglError & HttpErrorFields {
    return typeof error === "object" && error !== null && (error as any)[HTTP_MARKER] === true;
  }
}

/** A 4xx answer that is not one of the store's semantic errors (401, 413, 405...). Never retried. */
export class HttpClientError extends HttpError {
  constructor(info: ServerErrorInfo) {
    super(info);
    this.name = "HttpClientError";
  }
}

/** A 5xx or 408 answer that persisted through the retries (or the server stopped looking healthy). */
export class HttpServerError extends HttpError {
  constructor(info: ServerErrorInfo) {
    super(info);
    this.name = "HttpServerError";
  }
}

/** No answer: connection refused or reset, DNS, or the client-side timeout. */
export class HttpNetworkError extends HttpError {
  constructor(info: ServerErrorInfo, cause: unknown) {
    super(info, { cause });
    this.name = "HttpNetworkError";
  }
}

/** 404 from a store route: a core NotFoundError that also carries the HTTP details. */
export class RemoteNotFoundError extends withHttpFields(NotFoundError) {
  constructor(info: ServerErrorInfo) {
    const kind = (info.field?.replace(/_id$/, "") ?? "rollout") as EntityKind;
    const id = /(\S+) not found/i.exec(info.detail)?.[1] ?? "";
    super(kind, id, info.detail);
    markHttp(this, info);
  }
}

/** 409: a core IllegalTransitionError carrying the HTTP details. */
export class RemoteIllegalTransitionError extends withHttpFields(IllegalTransitionError) {
  constructor(info: ServerErrorInfo) {
    const m = /Illegal (rollout|attempt) status transition for (\S+): (\S+) -> (\S+)/.exec(info.detail);
    super((m?.[1] as "rollout" | "attempt") ?? "rollout", m?.[2] ?? "", m?.[3] ?? "", m?.[4] ?? "");
    this.message = info.detail;
    markHttp(this, info);
  }
}

/** 410 from a span read: a core SpansEvictedError (the store dropped that rollout's spans) with the HTTP details. */
export class RemoteSpansEvictedError extends withHttpFields(SpansEvictedError) {
  constructor(info: ServerErrorInfo) {
    const m = /Spans of (?:attempt (\S+) of )?rollout (\S+) were evicted/.exec(info.detail);
    super(m?.[2] ?? "", m?.[1] ?? null);
    this.message = info.detail;
    markHttp(this, info);
  }
}

/** 400/422: a core InvalidArgumentError naming the field the server named. */
export class RemoteInvalidArgumentError extends InvalidArgumentError {
  declare readonly status: number;
  declare readonly detail: string;
  declare readonly errorType: string | null;
  declare readonly method: string;
  declare readonly url: string;
  constructor(info: ServerErrorInfo, issues?: ReadonlyArray<{ path: string; message: string }>) {
    super(info.field ?? "", info.detail, issues);
    this.message = info.detail;
    markHttp(this, { ...info, field: info.field ?? "" });
  }
}

/** Turn a server error body into the right error class. */
export function errorFromResponse(info: ServerErrorInfo, body: unknown): Error {
  const issues = Array.isArray((body as { errors?: unknown })?.errors)
    ? ((body as { errors: Array<{ path: string; message: string }> }).errors ?? undefined)
    : (fastApiIssues((body as { detail?: unknown })?.detail) ?? undefined);
  // A 404 without the store's error_type is a missing route (e.g. an older server), not a missing entity.
  if (info.status === 404 && info.errorType === "NotFoundError") return new RemoteNotFoundError(info);
  if (info.status === 409) return new RemoteIllegalTransitionError(info);
  if (info.status === 410 && info.errorType === "SpansEvictedError") return new RemoteSpansEvictedError(info);
  if (info.status === 400 || info.status === 422) return new RemoteInvalidArgumentError(info, issues);
  if (info.status === 408 || info.status >= 500) return new HttpServerError(info);
  return new HttpClientError(info);
}

/** Pull `{detail, error_type, field}` out of a FastAPI-style or agl error body. */
export function describeErrorBody(
  body: unknown,
  fallback: string,
): Pick<ServerErrorInfo, "detail" | "errorType" | "field"> {
  if (typeof body !== "object" || body === null) {
    return { detail: typeof body === "string" && body ? body : fallback, errorType: null, field: null };
  }
  const b = body as Record<string, unknown>;
  const fastApi = fastApiIssues(b.detail);
  if (fastApi) {
    return {
      detail: fastApi.map((i) => `${i.path || "body"}: ${i.message}`).join("; "),
      errorType: null,
      field: fastApi[0]?.path ?? null,
    };
  }
  const detail =
    typeof b.detail === "string" ? b.detail : b.detail !== undefined ? JSON.stringify(b.detail) : fallback;
  return {
    detail,
    errorType: typeof b.error_type === "string" ? b.error_type : null,
    field: typeof b.field === "string" ? b.field : null,
  };
}

/**
 * FastAPI's validation answer (Python Agent Lightning's 422): `detail` is a list of
 * `{loc: ["body", "rollouts", 0, "input"], msg}`; the field path leaves out the "body"/"query" root.
 */
export function fastApiIssues(detail: unknown): Array<{ path: string; message: string }> | null {
  if (!Array.isArray(detail) || detail.length === 0) return null;
  const issues: Array<{ path: string; message: string }> = [];
  for (const item of detail) {
    const loc = (item as { loc?: unknown })?.loc;
    const msg = (item as { msg?: unknown })?.msg;
    if (!Array.isArray(loc) || typeof msg !== "string") return null;
    const path = (["body", "query", "path"].includes(String(loc[0])) ? loc.slice(1) : loc).join(".");
    issues.push({ path, message: msg });
  }
  return issues;
}
