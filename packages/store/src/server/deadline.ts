import type { MiddlewareHandler } from "hono";

interface Pending {
  deadline: number;
  reject: (error: unknown) => void;
}

/**
 * Per-request timeouts of one duration: `race(work)` fails with `makeError()` after `ms` while the
 * work carries on (it cannot be cancelled; see @agl/client's retry rule).
 *
 * One shared timer instead of a setTimeout/clearTimeout pair per request (timer list inserts were
 * ~1.5% of the server's CPU per request). Every request gets the same duration, so insertion order
 * is deadline order and a sweep only looks at the oldest.
 */
export class Deadlines {
  private readonly pending = new Set<Pending>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    private readonly makeError: () => Error,
  ) {}

  async race<T>(work: Promise<T>): Promise<T> {
    let reject!: (error: unknown) => void;
    const expired = new Promise<never>((_, r) => {
      reject = r;
    });
    const entry: Pending = { deadline: performance.now() + this.ms, reject };
    this.pending.add(entry);
    if (this.timer === undefined) this.arm(this.ms);
    try {
      return await Promise.race([work, expired]);
    } finally {
      this.pending.delete(entry);
    }
  }

  private arm(delay: number): void {
    this.timer = setTimeout(() => this.sweep(), Math.max(1, Math.ceil(delay)));
    this.timer.unref?.();
  }

  private sweep(): void {
    this.timer = undefined;
    const now = performance.now();
    for (const entry of this.pending) {
      if (entry.deadline > now) {
        this.arm(entry.deadline - now);
        return;
      }
      this.pending.delete(entry);
      entry.reject(this.makeError());
    }
  }
}

/** The per-request timeout as hono middleware (same behaviour as hono/timeout; see Deadlines). */
export function requestDeadline(ms: number, makeError: () => Error): MiddlewareHandler {
  const deadlines = new Deadlines(ms, makeError);
  return async (_c, next) => {
    await deadlines.race(next());
  };
}
