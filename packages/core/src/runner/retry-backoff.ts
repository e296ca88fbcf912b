import type { Logger } from "../logger.js";

/** One line for an error: its message (with the cause's, when it adds something), never a stack. */
export function oneLine(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause.message : undefined;
  const text = cause && !error.message.includes(cause) ? `${error.message} (${cause})` : error.message;
  return text.replace(/\s*\n\s*/g, " ");
}

/**
 * True for an authentication or authorisation refusal (HTTP 401/403, as the store client's errors carry
 * in `status`): retrying with the same credentials cannot succeed.
 */
export function isAuthFailure(error: unknown): boolean {
  const status = (error as { status?: unknown } | null)?.status;
  return status === 401 || status === 403;
}

/**
 * Exponential back-off for a call retried in a loop (the runner's dequeue): after each failure the next
 * try waits twice as long (from `initialMs` up to `maxMs`), and each failure is logged as one line
 * saying when the next try comes, not as a stack per poll.
 */
export class RetryBackoff {
  private failures = 0;

  constructor(
    private readonly what: string,
    private readonly logger: Logger,
    private readonly initialMs = 500,
    private readonly maxMs = 30_000,
  ) {}

  /** The wait before the next try after failures, or undefined when the last call succeeded. */
  delayMs(): number | undefined {
    if (this.failures === 0) return undefined;
    return Math.min(this.maxMs, this.initialMs * 2 ** (this.failures - 1));
  }

  failed(error: unknown): void {
    this.failures++;
    const seconds = (this.delayMs() ?? 0) / 1000;
    this.logger.warn(
      `${this.what} failed (try ${this.failures}): ${oneLine(error)}; retrying in ${seconds} s`,
    );
  }

  succeeded(): void {
    if (this.failures > 0) this.logger.info(`${this.what} works again after ${this.failures} failed tries`);
    this.failures = 0;
  }
}
