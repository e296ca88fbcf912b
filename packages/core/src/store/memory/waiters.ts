/**
 * Completion waiters for waitForRollouts: each waiter holds the ids it still waits for and is woken by
 * `notify` when one of them becomes terminal; no polling. A waiter resolves when its set empties or its
 * timer fires, and is rejected when the store closes.
 */
interface Waiter {
  pending: Set<string>;
  resolve: () => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout | null;
}

export class CompletionWaiters {
  private readonly byRollout = new Map<string, Set<Waiter>>();
  private readonly all = new Set<Waiter>();

  constructor(private readonly onCountChange: (count: number) => void = () => {}) {}

  get count(): number {
    return this.all.size;
  }

  /**
   * Resolve once every id in `pending` was notified, or after `timeoutSeconds` (null = never).
   * `pending` must be non-empty.
   */
  wait(pending: Iterable<string>, timeoutSeconds: number | null): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { pending: new Set(pending), resolve, reject, timer: null };
      for (const id of waiter.pending) {
        let set = this.byRollout.get(id);
        if (!set) this.byRollout.set(id, (set = new Set()));
        set.add(waiter);
      }
      this.all.add(waiter);
      if (timeoutSeconds !== null) {
        waiter.timer = setTimeout(() => this.finish(waiter), Math.min(2_147_483_647, timeoutSeconds * 1000));
      }
      this.onCountChange(this.all.size);
    });
  }

  /** `id` became terminal. */
  notify(id: string): void {
    const set = this.byRollout.get(id);
    if (!set) return;
    this.byRollout.delete(id);
    for (const waiter of set) {
      waiter.pending.delete(id);
      if (waiter.pending.size === 0) this.finish(waiter);
    }
  }

  rejectAll(error: unknown): void {
    for (const waiter of [...this.all]) this.finish(waiter, error);
  }

  private finish(waiter: Waiter, error?: unknown): void {
    if (!this.all.delete(waiter)) return;
    if (waiter.timer) clearTimeout(waiter.timer);
    for (const id of waiter.pending) {
      const set = this.byRollout.get(id);
      set?.delete(waiter);
      if (set && set.size === 0) this.byRollout.delete(id);
    }
    this.onCountChange(this.all.size);
    if (error !== undefined) waiter.reject(error);
    else waiter.resolve();
  }
}
