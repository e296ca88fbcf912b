/**
 * A worker process: the core Runner claiming rollouts from a remote store server with N concurrent
 * rollouts. It probes the store first (a wrong token or URL fails at once with the fix, an unreachable
 * store is retried with one line per try). The first SIGINT/SIGTERM stops claiming and lets in-flight
 * rollouts finish (within the grace period, after which they are marked failed so the store can retry
 * them); a second one marks the rollouts it still holds failed, then exits.
 */
import {
  type AgentLike,
  consoleLogger,
  type LightningStore,
  type Logger,
  Runner,
  type RunnerSummary,
} from "@agl/core";
import { HttpError } from "./http/errors.js";
import { WorkerOptionsSchema } from "./options.js";
import { probeStore } from "./probe.js";
import { LightningStoreClient, type StoreServerInfo } from "./store-client.js";

/** Default deadline of an attempt whose rollout sets no `timeout_seconds` (30 minutes). */
export const DEFAULT_WORKER_TIMEOUT_SECONDS = 1800;

export interface WorkerOptions {
  /** A store server URL (e.g. http://127.0.0.1:4747) or any LightningStore. */
  store: string | LightningStore;
  agent: AgentLike;
  /** Bearer token for the store server (ignored when `store` is a LightningStore). */
  token?: string | null;
  /** Rollouts run at the same time. Default 1. */
  concurrency?: number;
  workerId?: string;
  /**
   * The LLM proxy's token secret: each agent's ProxyLLM then carries a token valid only for its own
   * attempt (see `RunnerOptions.proxyTokenSecret` in @agl/core).
   */
  proxyTokenSecret?: string;
  /** Poll interval when the queue is empty. Default 1000 ms. */
  pollIntervalMs?: number;
  /** How long in-flight rollouts may finish after a stop (or after the store ended them). Default 30 s. */
  gracePeriodMs?: number;
  /** Stop after claiming this many rollouts. */
  maxRollouts?: number;
  heartbeatIntervalSeconds?: number;
  /**
   * Deadline of attempts whose rollout has no `timeout_seconds`: the agent's signal is aborted and the
   * attempt marked `timeout`. Default 1800 (30 min); null for none.
   */
  defaultTimeoutSeconds?: number | null;
  /**
   * How long `run()` keeps trying to reach the store at start before it fails. Default 30 s; 0 checks
   * once. A refused token fails at once whatever this is.
   */
  startupTimeoutSeconds?: number;
  /** Stop gracefully on SIGINT/SIGTERM. Default true. */
  handleSignals?: boolean;
  logger?: Logger;
}

export class Worker {
  readonly runner: Runner;
  readonly store: LightningStore;
  private readonly ownsStore: boolean;
  private readonly storeUrl: string | undefined;
  private readonly token: string | null;
  private readonly controller = new AbortController();
  private readonly handleSignals: boolean;
  private readonly startupTimeoutSeconds: number;
  private readonly logger: Logger;
  private signalCount = 0;
  private probed = false;

  constructor(options: WorkerOptions) {
    const opts = WorkerOptionsSchema.parse(options);
    this.ownsStore = typeof opts.store === "string";
    this.storeUrl = typeof opts.store === "string" ? opts.store : undefined;
    this.token = opts.token ?? null;
    this.store =
      typeof opts.store === "string"
        ? new LightningStoreClient({ url: opts.store, token: opts.token ?? null })
        : opts.store;
    this.logger = opts.logger ?? consoleLogger();
    this.handleSignals = opts.handleSignals ?? true;
    this.startupTimeoutSeconds = opts.startupTimeoutSeconds ?? 30;
    this.runner = new Runner({
      store: this.store,
      agent: opts.agent,
      concurrency: opts.concurrency ?? 1,
      ...(opts.workerId ? { workerId: opts.workerId } : {}),
      ...(opts.proxyTokenSecret === undefined ? {} : { proxyTokenSecret: opts.proxyTokenSecret }),
      pollIntervalMs: opts.pollIntervalMs ?? 1000,
      gracePeriodMs: opts.gracePeriodMs ?? 30_000,
      defaultTimeoutSeconds:
        opts.defaultTimeoutSeconds === undefined
          ? DEFAULT_WORKER_TIMEOUT_SECONDS
          : opts.defaultTimeoutSeconds,
      ...(opts.maxRollouts ? { maxRollouts: opts.maxRollouts } : {}),
      ...(opts.heartbeatIntervalSeconds ? { heartbeatIntervalSeconds: opts.heartbeatIntervalSeconds } : {}),
      logger: this.logger,
    });
  }

  get workerId(): string {
    return this.runner.workerId;
  }

  /**
   * Which store server this worker talks to (agl-ts or Python Agent Lightning), or null for an
   * in-process store or a server that cannot be reached yet (the runner keeps polling it). A refused
   * token (401/403) is thrown: no claim could ever succeed.
   */
  async describeServer(): Promise<StoreServerInfo | null> {
    if (!(this.store instanceof LightningStoreClient)) return null;
    try {
      return await this.store.serverInfo();
    } catch (error) {
      if (HttpError.isInstance(error) && (error.status === 401 || error.status === 403)) throw error;
      this.logger.warn(
        `worker ${this.workerId}: could not identify the store server yet: ${(error as Error).message}`,
      );
      return null;
    }
  }

  /**
   * Check the store server answers with this token (run() does it first; call it earlier to fail before
   * anything else): StoreAuthError at once on 401/403, StoreUnreachableError after the start-up timeout.
   */
  async probe(): Promise<void> {
    if (this.storeUrl === undefined || this.probed) return;
    await probeStore(this.storeUrl, {
      token: this.token,
      timeoutSeconds: this.startupTimeoutSeconds,
      logger: this.logger,
      signal: this.controller.signal,
    });
    this.probed = true;
  }

  /**
   * Probe the store, then run until stopped (signal, stop(), or maxRollouts claimed); resolves with the
   * runner's summary. Rejects at once when the store refuses the token.
   */
  async run(options: { signal?: AbortSignal } = {}): Promise<RunnerSummary> {
    const onSignal = (name: NodeJS.Signals) => {
      this.signalCount++;
      if (this.signalCount === 1) {
        this.logger.info(
          `worker ${this.workerId}: ${name}, finishing ${this.runner.inFlightCount} in-flight rollout(s)`,
        );
        this.stop();
        return;
      }
      this.logger.warn(
        `worker ${this.workerId}: second ${name}, marking ${this.runner.inFlightCount} held rollout(s) failed and exiting`,
      );
      // Bounded: a store that does not answer must not keep a process that was told twice to go.
      const bound = new Promise((resolve) => setTimeout(resolve, 5000).unref());
      void Promise.race([this.runner.abandonInFlight(), bound]).finally(() => process.exit(130));
    };
    const external = options.signal;
    const onExternal = () => this.stop();
    external?.addEventListener("abort", onExternal, { once: true });
    if (external?.aborted) this.stop();
    if (this.handleSignals) {
      process.on("SIGINT", onSignal);
      process.on("SIGTERM", onSignal);
    }
    try {
      await this.probe();
      return await this.runner.run({ signal: this.controller.signal });
    } finally {
      external?.removeEventListener("abort", onExternal);
      if (this.handleSignals) {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
      if (this.ownsStore) await this.store.close();
    }
  }

  /** Stop claiming; in-flight rollouts get the grace period. */
  stop(): void {
    this.controller.abort(new Error(`worker ${this.workerId} stopping`));
  }
}
