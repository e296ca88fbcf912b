/**
 * Group commit: concurrent calls of one kind (span inserts, attempt updates, …) are gathered and
 * written by ONE transaction, so N requests cost one commit (one WAL flush) and a handful of
 * statements instead of N of each. No timer: a batch starts as soon as a transaction slot is free,
 * so a lone call waits for nothing, and calls arriving while a batch commits form the next batch.
 * Every call resolves only after the transaction holding it has committed (an acknowledged write is
 * durable). When a batch of several calls fails as a whole (an error the batch did not attribute to
 * one call), each call is retried alone, so one bad call never takes its neighbours down.
 */

/** The outcome of one call of a batch: its value, or the error only that call gets. */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

interface Pending<J, R> {
  job: J;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

export interface GroupCommitOptions<J> {
  /** Batches in flight at once (each holds one pooled connection); default 1. */
  maxInFlight?: number;
  /** Calls per batch at most; default 256. */
  maxBatch?: number;
  /**
   * Calls with the same key never share a batch nor run at once (a later one waits until the
   * earlier one's batch is done, in order), for writers that must see each other's results, e.g.
   * two updates of one rollout.
   */
  key?: (job: J) => string;
}

export class GroupCommit<J, R> {
  private queue: Array<Pending<J, R>> = [];
  private running = 0;
  /** Keys of the calls in batches now in flight. */
  private readonly busyKeys = new Set<string>();
  private readonly maxInFlight: number;
  private readonly maxBatch: number;

  constructor(
    /** Write `jobs` in one transaction; one Settled per job, in order. A throw fails the whole batch. */
    private readonly write: (jobs: J[]) => Promise<Array<Settled<R>>>,
    private readonly options: GroupCommitOptions<J> = {},
  ) {
    this.maxInFlight = options.maxInFlight ?? 1;
    this.maxBatch = options.maxBatch ?? 256;
  }

  submit(job: J): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.drain();
    });
  }

  /** Calls waiting for a batch (not yet in a transaction). */
  get waiting(): number {
    return this.queue.length;
  }

  private drain(): void {
    while (this.running < this.maxInFlight && this.queue.length > 0) {
      const batch = this.take();
      if (batch.length === 0) return;
      const keys = this.options.key ? batch.map((p) => this.options.key!(p.job)) : [];
      for (const k of keys) this.busyKeys.add(k);
      this.running++;
      this.run(batch).finally(() => {
        this.running--;
        for (const k of keys) this.busyKeys.delete(k);
        this.drain();
      });
    }
  }

  /** The next batch: queue order, at most maxBatch, one call per key and none of a key in flight. */
  private take(): Array<Pending<J, R>> {
    const key = this.options.key;
    if (!key) return this.queue.splice(0, this.maxBatch);
    const batch: Array<Pending<J, R>> = [];
    const rest: Array<Pending<J, R>> = [];
    // Keys taken or passed over: a later call of such a key keeps its place behind the earlier one.
    const blocked = new Set(this.busyKeys);
    for (const p of this.queue) {
      const k = key(p.job);
      if (batch.length < this.maxBatch && !blocked.has(k)) batch.push(p);
      else rest.push(p);
      blocked.add(k);
    }
    this.queue = rest;
    return batch;
  }

  private async run(batch: Array<Pending<J, R>>): Promise<void> {
    let results: Array<Settled<R>>;
    try {
      results = await this.write(batch.map((p) => p.job));
    } catch (error) {
      if (batch.length === 1) {
        batch[0]!.reject(error);
        return;
      }
      // Nothing of the batch was committed: each call alone, so only the culprit fails.
      await Promise.all(batch.map((p) => this.run([p])));
      return;
    }
    batch.forEach((p, i) => {
      const r = results[i]!;
      if (r.ok) p.resolve(r.value);
      else p.reject(r.error);
    });
  }
}
