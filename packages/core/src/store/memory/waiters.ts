/**
 * Completion waiters for waitForRollouts: each waiter holds the ids it still waits for and is woken by
 * `notify` when one of them becomes terminal; no polling. A waiter resolves when its set empties or its
 * timer fires, and is rejected when the store closes or its signal aborts. However it ends, `finish`
 * removes it everywhere (maps, timer, abort listener), so a cancelled waiter leaves nothing behind.
 */
import { AbortedError } from "../../errors.js";

interface Waiter {
  pending: Set<string>;
  resolve: () => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout | null;
  signal: AbortSignal | null;
  onAbort: (() => void) | null;
}

export class CompletionWaiters {
  private readonly byRollout = new Map<string, Set<Waiter>>();
  private readonly all = new Set<Waiter>();

  constructor(private readonly onCountChange: (count: number) => void = () => {}) {}

  get count(): number {
    return this.all.size;
  }

  /**
   * Resolve once every id in `pending` was notified, or after `timeoutSeconds` (null = never); reject
   * with AbortedError when `signal` aborts. `pending` must be non-empty.
   */
  wait(pending: Iterable<string>, timeoutSeconds: number | null, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(AbortedError.fromSignal(signal, "waitForRollouts"));
        return;
      }
      const waiter: Waiter = {
        pending: new Set(pending),
        resolve,
        reject,
        timer: null,
        signal: signal ?? null,
        onAbort: null,
      };
      for (const id of waiter.pending) {
        let set = this.byRollout.get(id);
        if (!set) this.byRollout.set(id, (set = new Set()));
        set.add(waiter);
      }
      this.all.add(waiter);
      if (timeoutSeconds !== null) {
        waiter.timer = setTimeout(() => this.finish(waiter), Math.min(2_147_483_647, timeoutSeconds * 1000));
      }
      if (signal) {
        waiter.onAbort = () => this.finish(waiter, AbortedError.fromSignal(signal, "waitForRollouts"));
        signal.addEventListener("abort", waiter.onAbort, { once: true });
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
    if (waiter.onAbort) waiter.signal?.removeEventListener("abort", waiter.onAbort);
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
