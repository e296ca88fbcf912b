/**
 * The active watchdog of a durable store instance. Several processes may share one database, so no
 * instance owns the deadlines: each keeps a timer (unref'd) armed for the earliest deadline it knows
 * of, and never sleeps longer than `maxSleepMs` so that deadlines written by other processes are
 * noticed. The expiry pass itself (supplied by the store) re-reads and conditionally updates rows in
 * a transaction, so concurrent passes in different instances time an attempt out exactly once.
 */

/** Runs one expiry pass at `now` and returns the earliest deadline still pending (epoch seconds) or null. */
export type ExpiryPass = (now: number) => Promise<number | null>;

/** setTimeout's maximum delay. */
const MAX_DELAY_MS = 2_147_483_647;
const RETRY_FLOOR_MS = 5;

export class Watchdog {
  /** The earliest deadline this instance knows of (epoch seconds). */
  private earliest = Number.POSITIVE_INFINITY;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Number.POSITIVE_INFINITY;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly pass: ExpiryPass,
    private readonly options: { active: boolean; maxSleepMs: number; onError: (error: unknown) => void },
  ) {}

  /** Whether a deadline this instance knows of has passed (the store then runs a pass before answering). */
  isDue(now: number): boolean {
    return now > this.earliest;
  }

  /** This instance wrote a deadline: make sure the timer fires for it. */
  note(deadline: number | null): void {
    if (deadline === null || deadline >= this.earliest) return;
    this.earliest = deadline;
    this.arm();
  }

  /** Learn the pass's result (after a pass the store ran itself, e.g. synchronously). */
  learned(earliest: number | null): void {
    this.earliest = earliest ?? Number.POSITIVE_INFINITY;
    this.arm();
  }

  /** Run a pass now (shared by concurrent callers) and re-arm. */
  run(now: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.running) {
      this.running = this.pass(now)
        .then((earliest) => this.learned(earliest))
        .finally(() => {
          this.running = null;
        });
    }
    return this.running;
  }

  /** Arm the timer for min(earliest known deadline, now + maxSleep). */
  arm(): void {
    if (!this.options.active || this.stopped) return;
    const nowMs = Date.now();
    const dueMs = Number.isFinite(this.earliest) ? this.earliest * 1000 : Number.POSITIVE_INFINITY;
    // +1 ms: verdicts use a strict "older than", so fire just after the deadline.
    // A deadline still due after a pass belongs to a row another transaction holds: retry shortly, not hot.
    const atMs = Math.min(Math.max(dueMs + 1, nowMs + RETRY_FLOOR_MS), nowMs + this.options.maxSleepMs);
    if (this.timer && this.timerAt <= atMs) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = atMs;
    this.timer = setTimeout(() => this.fire(), Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil(atMs - nowMs))));
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private fire(): void {
    this.timer = null;
    this.timerAt = Number.POSITIVE_INFINITY;
    this.run(Date.now() / 1000).catch((error) => {
      if (!this.stopped) this.options.onError(error);
      this.arm();
    });
  }
}
