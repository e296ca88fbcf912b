import type { GenerationEngine } from "../generate/engine.js";
import { type GenerateRequest, type GenerateResult, withModelVersion } from "../generate/request.js";
import type { CausalLM } from "../model/causal-lm.js";
import type { PolicyWorkers } from "./pool.js";

/**
 * A GenerationEngine whose sequences run on worker threads: each group (the `n` choices of one request)
 * goes to the least-loaded worker, whose own dynamic-batching Generator batches it with the others there.
 * Weight swaps drain every worker, apply the update to the main thread's model, broadcast the weights and
 * bump the version, so every result is produced by exactly one version (as with `Generator`).
 */
export class PooledGenerator implements GenerationEngine {
  private _version = 0;
  private paused = false;
  private active = 0;
  private queued = 0;
  private admitWaiters: Array<() => void> = [];
  private drainWaiters: Array<() => void> = [];
  /** The broadcast after an in-place update (`resume({ weightsChanged })`), awaited before dispatching. */
  private syncing: Promise<void> | undefined;

  constructor(private readonly pool: PolicyWorkers) {}

  get policy(): CausalLM {
    return this.pool.model;
  }
  get version(): number {
    return this._version;
  }
  get activeCount(): number {
    return this.active;
  }
  get queuedCount(): number {
    return this.queued;
  }
  get isPaused(): boolean {
    return this.paused;
  }

  async generateMany(requests: readonly GenerateRequest[]): Promise<GenerateResult[]> {
    // Worker replicas carry the default adapter only: a named one must not silently fall back to it.
    if (requests.some((r) => r.adapter !== undefined))
      throw new Error("PooledGenerator serves one adapter; multi-LoRA requests need the in-thread Generator");
    if (this.paused) {
      this.queued += requests.length;
      while (this.paused) await new Promise<void>((r) => this.admitWaiters.push(r));
      this.queued -= requests.length;
    }
    const version = this._version;
    this.active += requests.length;
    try {
      await this.syncing;
      const results = await this.pool.generate(this.pool.leastLoaded(), withModelVersion(requests, version));
      return results.map((r) => ({ ...r, modelVersion: version }));
    } finally {
      this.active -= requests.length;
      this.notifyDrained();
    }
  }

  pause(): Promise<void> {
    this.paused = true;
    if (this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  resume(options: { weightsChanged?: boolean } = {}): void {
    if (options.weightsChanged) {
      this._version++;
      this.syncing = this.pool.syncWeights();
      // Surfaced by the next generateMany; never an unhandled rejection.
      this.syncing.catch(() => {});
    }
    this.paused = false;
    const waiters = this.admitWaiters;
    this.admitWaiters = [];
    for (const w of waiters) w();
  }

  async swapWeights(apply?: CausalLM | ((model: CausalLM) => void | Promise<void>)): Promise<number> {
    await this.pause();
    try {
      if (typeof apply === "function") await apply(this.policy);
      else if (apply) this.policy.setWeightsFrom(apply);
      await this.pool.syncWeights();
      this._version++;
    } finally {
      this.resume();
    }
    return this._version;
  }

  private notifyDrained(): void {
    if (this.active > 0 || this.drainWaiters.length === 0) return;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w();
  }
}
