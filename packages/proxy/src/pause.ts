export type PauseMode = "reject" | "hold";

export interface PauseState {
  paused: boolean;
  /** What paused calls get: 429 + Retry-After ("reject") or parked until resume ("hold"). */
  mode: PauseMode;
  retry_after_seconds: number;
  reason: string | null;
  /** Calls past the gate and not finished. */
  inflight: number;
  /** Calls parked by hold mode. */
  held: number;
  paused_at: number | null;
  model_version: string | number | null;
}

/** Per pause; a new pause's `retryAfterSeconds` and `mode` default to the gate's configured ones. */
export interface PauseOptions {
  retryAfterSeconds?: number;
  reason?: string | null;
  mode?: PauseMode;
  /** Resolve only once in-flight calls have finished. */
  drain?: boolean;
  /** Give up draining after this long (the promise then rejects); default: wait forever. */
  drainTimeoutMs?: number;
}

export class DrainTimeoutError extends Error {
  constructor(readonly inflight: number) {
    super(`drain timed out with ${inflight} call(s) still in flight`);
    this.name = "DrainTimeoutError";
  }
}

type GateResult = { ok: true } | { ok: false; retryAfterSeconds: number; reason: string | null };

/**
 * The weight-update gate: counts in-flight calls and, while paused, turns new ones away or parks them.
 * Held calls wait at most `maxHoldMs`, then are rejected, so an agent is never stuck forever.
 */
export class PauseGate {
  private paused = false;
  private mode: PauseMode;
  private retryAfterSeconds: number;
  private readonly defaultMode: PauseMode;
  private readonly defaultRetryAfterSeconds: number;
  private reason: string | null = null;
  private pausedAt: number | null = null;
  private inflightCount = 0;
  private drainWaiters: Array<() => void> = [];
  private heldWaiters = new Set<(ok: boolean) => void>();
  modelVersion: string | number | null;
  private readonly maxHoldMs: number;

  constructor(
    options: {
      mode?: PauseMode;
      retryAfterSeconds?: number;
      maxHoldMs?: number;
      modelVersion?: string | number | null;
    } = {},
  ) {
    this.defaultMode = options.mode ?? "reject";
    this.defaultRetryAfterSeconds = options.retryAfterSeconds ?? 5;
    this.mode = this.defaultMode;
    this.retryAfterSeconds = this.defaultRetryAfterSeconds;
    this.maxHoldMs = options.maxHoldMs ?? 600_000;
    this.modelVersion = options.modelVersion ?? null;
  }

  get inflight(): number {
    return this.inflightCount;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Let a call in (counting it), park it (hold mode), or say why not. */
  async enter(): Promise<GateResult> {
    if (!this.paused) {
      this.inflightCount++;
      return { ok: true };
    }
    if (this.mode === "hold") {
      const resumed = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => {
          this.heldWaiters.delete(wake);
          resolve(false);
        }, this.maxHoldMs);
        const wake = (ok: boolean) => {
          clearTimeout(timer);
          resolve(ok);
        };
        this.heldWaiters.add(wake);
      });
      if (resumed && !this.paused) {
        this.inflightCount++;
        return { ok: true };
      }
    }
    return { ok: false, retryAfterSeconds: this.retryAfterSeconds, reason: this.reason };
  }

  /** The hot path's non-blocking enter(): false means paused, call enter() and await. */
  tryEnter(): boolean {
    if (this.paused) return false;
    this.inflightCount++;
    return true;
  }

  leave(): void {
    this.inflightCount--;
    if (this.inflightCount === 0 && this.drainWaiters.length) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
  }

  async pause(options: PauseOptions = {}): Promise<PauseState> {
    if (!this.paused) {
      // a new pause starts from the configured defaults: one pause's `retry_after_seconds: 60` must not
      // stick to every later one. Pausing again while paused (e.g. to drain) only changes what it names.
      this.retryAfterSeconds = this.defaultRetryAfterSeconds;
      this.mode = this.defaultMode;
    }
    this.paused = true;
    this.pausedAt ??= Date.now() / 1000;
    if (options.retryAfterSeconds !== undefined) this.retryAfterSeconds = options.retryAfterSeconds;
    if (options.reason !== undefined) this.reason = options.reason;
    if (options.mode !== undefined) this.mode = options.mode;
    if (options.drain) await this.drain(options.drainTimeoutMs);
    return this.state();
  }

  /** Resolve when nothing is in flight (immediately if already so). */
  drain(timeoutMs?: number): Promise<void> {
    if (this.inflightCount === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | null = null;
      const done = () => {
        if (timer) clearTimeout(timer);
        resolve();
      };
      this.drainWaiters.push(done);
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          this.drainWaiters = this.drainWaiters.filter((w) => w !== done);
          reject(new DrainTimeoutError(this.inflightCount));
        }, timeoutMs);
      }
    });
  }

  resume(options: { modelVersion?: string | number | null } = {}): PauseState {
    this.paused = false;
    this.reason = null;
    this.pausedAt = null;
    if (options.modelVersion !== undefined) this.modelVersion = options.modelVersion;
    const waiters = [...this.heldWaiters];
    this.heldWaiters.clear();
    for (const w of waiters) w(true);
    return this.state();
  }

  /** Reject every held call now (used on shutdown). */
  releaseHeld(): void {
    const waiters = [...this.heldWaiters];
    this.heldWaiters.clear();
    for (const w of waiters) w(false);
  }

  state(): PauseState {
    return {
      paused: this.paused,
      mode: this.mode,
      retry_after_seconds: this.retryAfterSeconds,
      reason: this.reason,
      inflight: this.inflightCount,
      held: this.heldWaiters.size,
      paused_at: this.pausedAt,
      model_version: this.modelVersion,
    };
  }
}
