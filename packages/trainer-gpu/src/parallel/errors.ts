/**
 * The one error type of the worker pool. `code` says what went wrong; `worker` names the thread (its
 * index in the pool) when one is concerned.
 */

const POLICY_WORKER_ERROR = Symbol.for("agl.PolicyWorkerError");

export type PolicyWorkerErrorCode =
  /** The policy is a model kind the pool cannot replicate. */
  | "unsupported_model"
  /** A worker thread failed to start (bad backend, worker file not found, ...). */
  | "start_failed"
  /** A worker thread crashed or exited while the pool was open; the pool is unusable from then on. */
  | "worker_exited"
  /** A task threw inside a worker (the worker is still alive). */
  | "task_failed"
  /** The pool was closed. */
  | "closed";

export class PolicyWorkerError extends Error {
  readonly [POLICY_WORKER_ERROR] = true;
  readonly code: PolicyWorkerErrorCode;
  readonly worker: number | undefined;

  constructor(
    code: PolicyWorkerErrorCode,
    message: string,
    options: { worker?: number; cause?: unknown } = {},
  ) {
    super(options.worker === undefined ? message : `worker ${options.worker}: ${message}`, {
      cause: options.cause,
    });
    this.name = "PolicyWorkerError";
    this.code = code;
    this.worker = options.worker;
  }

  /** True for a PolicyWorkerError from any copy of this package. */
  static isInstance(error: unknown): error is PolicyWorkerError {
    return (
      typeof error === "object" &&
      error !== null &&
      (error as Record<symbol, unknown>)[POLICY_WORKER_ERROR] === true
    );
  }
}
