/**
 * Measures how much of a period was spent waiting on the outside world (optimiser calls, rollouts),
 * counting overlapping waits once, so `elapsed - waited` is APO's own time even when waits run in parallel.
 */
export class Stopwatch {
  private active = 0;
  private since = 0;
  private total = 0;

  async wait<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active++ === 0) this.since = performance.now();
    try {
      return await fn();
    } finally {
      if (--this.active === 0) this.total += performance.now() - this.since;
    }
  }

  /** Milliseconds during which at least one wait was in progress (so far). */
  waitedMs(): number {
    return this.total + (this.active > 0 ? performance.now() - this.since : 0);
  }
}
