/**
 * A worker process: the core Runner claiming rollouts from a remote store server with N concurrent
 * rollouts. The first SIGINT/SIGTERM stops claiming and lets in-flight rollouts finish (within the
 * grace period, after which they are marked failed so the store can retry them); a second one
 * exits at once (attempts left running are then recovered by the store's watchdog).
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
import { LightningStoreClient, type StoreServerInfo } from "./store-client.js";

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
  /** How long in-flight rollouts may finish after a stop. Default 30 s. */
  gracePeriodMs?: number;
  /** Stop after claiming this many rollouts. */
  maxRollouts?: number;
  heartbeatIntervalSeconds?: number;
  /** Stop gracefully on SIGINT/SIGTERM. Default true. */
  handleSignals?: boolean;
  logger?: Logger;
}

export class Worker {
  readonly runner: Runner;
  readonly store: LightningStore;
  private readonly ownsStore: boolean;
  private readonly controller = new AbortController();
  private readonly handleSignals: boolean;
  private readonly logger: Logger;
  private signalCount = 0;

  constructor(options: WorkerOptions) {
    this.ownsStore = typeof options.store === "string";
    this.store =
      typeof options.store === "string"
        ? new LightningStoreClient({ url: options.store, token: options.token ?? null })
        : options.store;
    this.logger = options.logger ?? consoleLogger();
    this.handleSignals = options.handleSignals ?? true;
    this.runner = new Runner({
      store: this.store,
      agent: options.agent,
      concurrency: options.concurrency ?? 1,
      ...(options.workerId ? { workerId: options.workerId } : {}),
      ...(options.proxyTokenSecret === undefined ? {} : { proxyTokenSecret: options.proxyTokenSecret }),
      pollIntervalMs: options.pollIntervalMs ?? 1000,
      gracePeriodMs: options.gracePeriodMs ?? 30_000,
      ...(options.maxRollouts ? { maxRollouts: options.maxRollouts } : {}),
      ...(options.heartbeatIntervalSeconds
        ? { heartbeatIntervalSeconds: options.heartbeatIntervalSeconds }
        : {}),
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

  /** Run until stopped (signal, stop(), or maxRollouts claimed); resolves with the runner's summary. */
  async run(options: { signal?: AbortSignal } = {}): Promise<RunnerSummary> {
    const onSignal = (name: NodeJS.Signals) => {
      this.signalCount++;
      if (this.signalCount === 1) {
        this.logger.info(
          `worker ${this.workerId}: ${name}, finishing ${this.runner.inFlightCount} in-flight rollout(s)`,
        );
        this.stop();
      } else {
        this.logger.warn(
          `worker ${this.workerId}: second ${name}, exiting without waiting for in-flight rollouts`,
        );
        process.exit(130);
      }
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
