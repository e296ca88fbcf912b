/**
 * Error hierarchy. Every error carries a marker symbol so `isInstance` works across
 * duplicated package copies (the vercel/ai pattern) where `instanceof` would not.
 */
const AGL_MARKER = Symbol.for("agl.error");

function marker(name: string): symbol {
  return Symbol.for(`agl.error.${name}`);
}

export class AglError extends Error {
  protected readonly [AGL_MARKER] = true;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AglError";
  }

  static isInstance(error: unknown): error is AglError {
    return typeof error === "object" && error !== null && (error as any)[AGL_MARKER] === true;
  }
}

const NOT_FOUND = marker("NotFoundError");
export type EntityKind = "rollout" | "attempt" | "resources" | "worker" | "span";

/** An id that names nothing in the store. HTTP 404. */
export class NotFoundError extends AglError {
  protected readonly [NOT_FOUND] = true;
  readonly kind: EntityKind;
  readonly id: string;

  constructor(kind: EntityKind, id: string, message?: string) {
    super(message ?? `${capitalize(kind)} ${id} not found`);
    this.name = "NotFoundError";
    this.kind = kind;
    this.id = id;
  }

  static override isInstance(error: unknown): error is NotFoundError {
    return typeof error === "object" && error !== null && (error as any)[NOT_FOUND] === true;
  }
}

const ILLEGAL = marker("IllegalTransitionError");

/** A status change the state machine does not allow. HTTP 409. */
export class IllegalTransitionError extends AglError {
  protected readonly [ILLEGAL] = true;
  readonly entity: "rollout" | "attempt";
  readonly id: string;
  readonly from: string;
  readonly to: string;

  /** `reason` (optional) says why a transition the status table allows is refused here. */
  constructor(entity: "rollout" | "attempt", id: string, from: string, to: string, reason?: string) {
    super(`Illegal ${entity} status transition for ${id}: ${from} -> ${to}${reason ? ` (${reason})` : ""}`);
    this.name = "IllegalTransitionError";
    this.entity = entity;
    this.id = id;
    this.from = from;
    this.to = to;
  }

  static override isInstance(error: unknown): error is IllegalTransitionError {
    return typeof error === "object" && error !== null && (error as any)[ILLEGAL] === true;
  }
}

const INVALID = marker("InvalidArgumentError");

/** Bad input; `field` is the dotted path of the offending field ("" for the whole value). HTTP 400/422. */
export class InvalidArgumentError extends AglError {
  protected readonly [INVALID] = true;
  readonly field: string;
  readonly issues: ReadonlyArray<{ path: string; message: string }>;

  constructor(field: string, message: string, issues?: ReadonlyArray<{ path: string; message: string }>) {
    super(field ? `Invalid ${field}: ${message}` : message);
    this.name = "InvalidArgumentError";
    this.field = field;
    this.issues = issues ?? [{ path: field, message }];
  }

  static override isInstance(error: unknown): error is InvalidArgumentError {
    return typeof error === "object" && error !== null && (error as any)[INVALID] === true;
  }
}

const CLOSED = marker("StoreClosedError");

/** The store was closed; no further calls are accepted. */
export class StoreClosedError extends AglError {
  protected readonly [CLOSED] = true;

  constructor(message = "Store is closed") {
    super(message);
    this.name = "StoreClosedError";
  }

  static override isInstance(error: unknown): error is StoreClosedError {
    return typeof error === "object" && error !== null && (error as any)[CLOSED] === true;
  }
}

const EVICTED = marker("SpansEvictedError");

/**
 * The spans asked for were dropped by the in-memory store's span eviction (the reference raises
 * RuntimeError). HTTP 410. `attemptId` is null when the query covered every attempt.
 */
export class SpansEvictedError extends AglError {
  protected readonly [EVICTED] = true;
  readonly rolloutId: string;
  readonly attemptId: string | null;

  constructor(rolloutId: string, attemptId: string | null) {
    super(
      attemptId === null
        ? `Spans of rollout ${rolloutId} were evicted`
        : `Spans of attempt ${attemptId} of rollout ${rolloutId} were evicted`,
    );
    this.name = "SpansEvictedError";
    this.rolloutId = rolloutId;
    this.attemptId = attemptId;
  }

  static override isInstance(error: unknown): error is SpansEvictedError {
    return typeof error === "object" && error !== null && (error as any)[EVICTED] === true;
  }
}

const SPANS_NOT_STORED = marker("SpansNotStoredError");

/**
 * An attempt's spans could not all be written to the store, so its result is incomplete (a reward
 * without its triplets, or the reverse): the runner fails the attempt with this error instead of
 * reporting success, and the store's retry policy decides whether the rollout runs again.
 */
export class SpansNotStoredError extends AglError {
  protected readonly [SPANS_NOT_STORED] = true;
  readonly rolloutId: string;
  readonly attemptId: string;
  readonly count: number;

  constructor(rolloutId: string, attemptId: string, count: number) {
    super(`${count} span(s) of attempt ${attemptId} of rollout ${rolloutId} could not be stored`);
    this.name = "SpansNotStoredError";
    this.rolloutId = rolloutId;
    this.attemptId = attemptId;
    this.count = count;
  }

  static override isInstance(error: unknown): error is SpansNotStoredError {
    return typeof error === "object" && error !== null && (error as any)[SPANS_NOT_STORED] === true;
  }
}

const ABORTED = marker("AbortedError");

/**
 * A call was cancelled through its AbortSignal. `name` is "AbortError", the web-platform convention,
 * so code that checks `error.name === "AbortError"` (as for fetch) treats it like any other abort;
 * the signal's reason is kept as `cause`.
 */
export class AbortedError extends AglError {
  protected readonly [ABORTED] = true;

  constructor(message = "The operation was aborted", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "AbortError";
  }

  static override isInstance(error: unknown): error is AbortedError {
    return typeof error === "object" && error !== null && (error as any)[ABORTED] === true;
  }

  /** The error for `what` cancelled through `signal` (its reason becomes the cause). */
  static fromSignal(signal: AbortSignal, what: string): AbortedError {
    return new AbortedError(`${what} aborted`, { cause: signal.reason });
  }

  /** Throw an AbortedError for `what` if `signal` is already aborted. */
  static throwIfAborted(signal: AbortSignal | null | undefined, what: string): void {
    if (signal?.aborted) throw AbortedError.fromSignal(signal, what);
  }
}

function capitalize(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}
