/**
 * The active watchdog's clock: one deadline per rollout in a lazy min-heap, and a single unref'd
 * setTimeout armed for the earliest one. Re-arming happens only when the earliest deadline changes,
 * so there is no polling; a deadline that is replaced leaves a stale heap entry that is skipped.
 */
interface Entry {
  at: number;
  id: string;
  token: number;
}

/** setTimeout's maximum delay (2^31 - 1 ms); longer waits are re-armed on expiry. */
const MAX_DELAY_MS = 2_147_483_647;

export class DeadlineScheduler {
  private readonly heap: Entry[] = [];
  private readonly current = new Map<string, { at: number; token: number }>();
  private nextToken = 1;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Number.POSITIVE_INFINITY;
  private keepAlive = false;

  /**
   * @param onDue called with the ids whose deadline (epoch seconds) has passed
   * @param active arm a timer; when false, due ids are only found by explicit `due()` calls
   */
  constructor(
    private readonly onDue: (ids: string[], now: number) => void,
    private readonly active: boolean,
    private readonly now: () => number,
  ) {}

  /** Set (or clear, with null) the deadline of `id`. */
  set(id: string, at: number | null): void {
    const prev = this.current.get(id);
    if (at === null) {
      if (prev) {
        this.current.delete(id);
        this.arm();
      }
      return;
    }
    if (prev && prev.at === at) return;
    // The earliest deadline may have been the one replaced: arm() below re-targets the timer.
    const token = this.nextToken++;
    this.current.set(id, { at, token });
    this.push({ at, id, token });
    if (this.heap.length > 1024 && this.heap.length > 2 * this.current.size) this.compact();
    this.arm();
  }

  /** Rebuild the heap from the live deadlines, dropping stale entries (heartbeats create many). */
  private compact(): void {
    this.heap.length = 0;
    for (const [id, { at, token }] of this.current) this.push({ at, id, token });
  }

  /** Ids whose deadline is strictly before `now`; they are removed (the caller re-sets them if needed). */
  takeDue(now: number): string[] {
    const ids: string[] = [];
    while (this.heap.length > 0 && this.heap[0]!.at < now) {
      const entry = this.pop()!;
      const cur = this.current.get(entry.id);
      if (!cur || cur.token !== entry.token) continue;
      this.current.delete(entry.id);
      ids.push(entry.id);
    }
    return ids;
  }

  /** Keep the process alive while the timer is armed (used while someone waits on the store). */
  setKeepAlive(keepAlive: boolean): void {
    this.keepAlive = keepAlive;
    if (this.timer) {
      if (keepAlive) this.timer.ref();
      else this.timer.unref();
    }
  }

  get size(): number {
    return this.current.size;
  }

  /** Arm the timer for the earliest live deadline (no-op if already armed for it). */
  arm(): void {
    if (!this.active) return;
    while (this.heap.length > 0) {
      const top = this.heap[0]!;
      const cur = this.current.get(top.id);
      if (cur && cur.token === top.token) break;
      this.pop();
    }
    if (this.heap.length === 0) {
      this.disarm();
      return;
    }
    const at = this.heap[0]!.at;
    if (this.timer && this.timerAt === at) return;
    this.disarm();
    // +1 ms: the verdicts use a strict "older than", so fire just after the deadline.
    const delay = Math.min(MAX_DELAY_MS, Math.max(0, Math.ceil((at - this.now()) * 1000) + 1));
    this.timerAt = at;
    this.timer = setTimeout(() => this.fire(), delay);
    if (!this.keepAlive) this.timer.unref();
  }

  stop(): void {
    this.disarm();
    this.heap.length = 0;
    this.current.clear();
  }

  private fire(): void {
    this.timer = null;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.now();
    const ids = this.takeDue(now);
    if (ids.length > 0) this.onDue(ids, now);
    this.arm();
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Number.POSITIVE_INFINITY;
  }

  private push(entry: Entry): void {
    const h = this.heap;
    h.push(entry);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (h[p]!.at <= h[i]!.at) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  private pop(): Entry | undefined {
    const h = this.heap;
    if (h.length === 0) return undefined;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]!.at < h[m]!.at) m = l;
        if (r < h.length && h[r]!.at < h[m]!.at) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return top;
  }
}
