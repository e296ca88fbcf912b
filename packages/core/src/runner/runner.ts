import type { z } from "zod";
import { buildRolloutContext } from "../agent/resources.js";
import { toLitAgent } from "../agent/rollout.js";
import type { LitAgentLike } from "../agent/types.js";
import { emitException } from "../emitters/emit.js";
import { IllegalTransitionError, NotFoundError, SpansNotStoredError } from "../errors.js";
import { consoleLogger, type Logger } from "../logger.js";
import { parseOptions } from "../options.js";
import type { LightningStore } from "../store/store.js";
import { LightningTracer } from "../tracing/tracer.js";
import { nowSeconds } from "../types/ids.js";
import type { NamedResources, ResourceInput } from "../types/resources.js";
import type { AttemptedRollout, Rollout, RolloutMode } from "../types/rollout.js";
import { attemptTokenMinter, finishAttempt, loadAttemptResources, markAbandoned } from "./attempt-steps.js";
import { type AttemptEnd, type AttemptWatch, attemptEndedError, watchAttempt } from "./attempt-watch.js";
import { recordAgentResult } from "./result-spans.js";
import { isAuthFailure, RetryBackoff } from "./retry-backoff.js";
import { withRolloutSpan } from "./rollout-span.js";
import {
  type AttemptOutcome,
  type RunnerOptions,
  RunnerOptionsSchema,
  type RunnerSummary,
} from "./runner-options.js";
import { systemSnapshot } from "./system-snapshot.js";

export { type AttemptOutcome, type RunnerOptions, RunnerOptionsSchema, type RunnerSummary };

let workerCounter = 0;

interface InFlight {
  attempted: AttemptedRollout;
  controller: AbortController;
  abandoned: boolean;
  done: Promise<AttemptOutcome>;
}

/**
 * Claims rollouts from a store and runs an agent on them, up to `concurrency` at a time, tracing each
 * attempt into the store and marking it succeeded or failed. One process can host many runners; each
 * rollout's spans are attributed through the async context, never through shared state.
 */
export class Runner {
  readonly workerId: string;
  readonly store: LightningStore;
  readonly agent: LitAgentLike & { agentName: string };
  readonly tracer: LightningTracer;
  readonly logger: Logger;
  readonly concurrency: number;
  private readonly opts: z.output<typeof RunnerOptionsSchema>;
  private readonly inflight = new Map<string, InFlight>();
  private readonly mintAttemptToken: ((attempted: AttemptedRollout) => string) | undefined;
  private readonly claimRetry: RetryBackoff;
  private wake: () => void = () => {};
  private running = false;

  constructor(options: RunnerOptions) {
    this.opts = parseOptions(RunnerOptionsSchema, options, "runner");
    this.store = this.opts.store;
    this.agent = toLitAgent(this.opts.agent);
    this.logger = this.opts.logger ?? consoleLogger();
    this.tracer = this.opts.tracer ?? new LightningTracer({ logger: this.logger });
    this.concurrency = this.opts.concurrency;
    this.workerId = this.opts.workerId ?? `Worker-${process.pid}-${workerCounter++}`;
    this.mintAttemptToken = attemptTokenMinter(this.opts.proxyTokenSecret);
    this.claimRetry = new RetryBackoff(`worker ${this.workerId}: dequeue`, this.logger);
  }

  /** Rollouts being run right now. */
  get inFlightCount(): number {
    return this.inflight.size;
  }

  /**
   * Claim and run rollouts until `signal` aborts or `maxRollouts` have been claimed. On abort, no new
   * rollouts are claimed; in-flight ones get `gracePeriodMs` to finish, then their agents' signals are
   * aborted and their attempts marked failed.
   */
  async run(options: { signal?: AbortSignal } = {}): Promise<RunnerSummary> {
    if (this.running) throw new Error(`runner ${this.workerId} is already running`);
    this.running = true;
    const signal = options.signal;
    const started = nowSeconds();
    const summary: RunnerSummary = {
      workerId: this.workerId,
      claimed: 0,
      succeeded: 0,
      failed: 0,
      stale: 0,
      abandoned: 0,
      durationSeconds: 0,
    };
    const onAbort = () => this.wake();
    signal?.addEventListener("abort", onAbort);
    // Not unref'd: while a runner runs (and may hold attempts) the process must stay alive, even when
    // an agent waits on a promise that nothing else keeps pending.
    const heartbeat = setInterval(
      () => void this.workerHeartbeat(),
      this.opts.heartbeatIntervalSeconds * 1000,
    );
    await this.workerHeartbeat();
    const max = this.opts.maxRollouts ?? Number.POSITIVE_INFINITY;
    try {
      while (!signal?.aborted && summary.claimed < max) {
        const free = this.concurrency - this.inflight.size;
        if (free <= 0) {
          await this.sleep(Number.POSITIVE_INFINITY);
          continue;
        }
        const claimed = await this.claim(Math.min(free, max - summary.claimed));
        if (claimed.length === 0) {
          if (signal?.aborted) break;
          await this.sleep(this.claimRetry.delayMs() ?? this.jitter(this.opts.pollIntervalMs));
          continue;
        }
        for (const attempted of claimed) {
          summary.claimed++;
          this.launch(attempted, summary);
        }
      }
      if (signal?.aborted) await this.drainWithGrace(summary);
      else await Promise.all([...this.inflight.values()].map((f) => f.done));
    } catch (error) {
      // The store refused us (see claim): the agents still running can no longer report, stop them.
      for (const entry of this.inflight.values()) entry.controller.abort(error);
      throw error;
    } finally {
      clearInterval(heartbeat);
      signal?.removeEventListener("abort", onAbort);
      this.running = false;
    }
    summary.durationSeconds = nowSeconds() - started;
    return summary;
  }

  /**
   * Run one rollout directly (Agent Lightning `runner.step`): optionally publish `resources`, start a
   * rollout for `input` on this worker, run the agent and return the finished rollout. An agent error
   * is recorded on the attempt and then rethrown.
   */
  async step(
    input: unknown,
    options: { resources?: Record<string, ResourceInput>; mode?: RolloutMode | null } = {},
  ): Promise<Rollout> {
    let resourcesId: string | null = null;
    if (options.resources)
      resourcesId = (await this.store.addResources(options.resources as NamedResources)).resources_id;
    const attempted = await this.store.startRollout({
      input,
      mode: options.mode ?? null,
      resources_id: resourcesId,
      worker_id: this.workerId,
    });
    const outcome = await this.executeRollout(attempted);
    if (outcome.status === "failed") throw outcome.error;
    const rollout = await this.store.getRolloutById(attempted.rollout_id);
    if (!rollout) throw new NotFoundError("rollout", attempted.rollout_id);
    return rollout;
  }

  /**
   * Run the agent on one claimed attempt and record the result. Never throws for agent errors (they
   * become a failed attempt, returned as the outcome); the building block for custom claim loops.
   */
  async executeRollout(
    attempted: AttemptedRollout,
    options: { signal?: AbortSignal; isAbandoned?: () => boolean } = {},
  ): Promise<AttemptOutcome> {
    const rid = attempted.rollout_id;
    const aid = attempted.attempt.attempt_id;
    const abandoned = options.isAbandoned ?? (() => false);
    // The agent's signal aborts when the runner stops it (options.signal) or the attempt is ended.
    const agentController = new AbortController();
    const onOuterAbort = () => agentController.abort(options.signal?.reason);
    if (options.signal?.aborted) onOuterAbort();
    options.signal?.addEventListener("abort", onOuterAbort, { once: true });
    let watch: AttemptWatch | undefined;
    try {
      try {
        await this.store.updateAttempt(rid, aid, { status: "running", last_heartbeat_time: nowSeconds() });
      } catch (error) {
        if (IllegalTransitionError.isInstance(error) || NotFoundError.isInstance(error)) {
          this.logger.info(`attempt ${aid} of ${rid} cannot run any more: ${(error as Error).message}`);
          return { status: "stale", reason: (error as Error).message };
        }
        throw error;
      }
      watch = watchAttempt({
        store: this.store,
        attempted,
        heartbeatMs: this.opts.heartbeatIntervalSeconds * 1000,
        timeoutSeconds: attempted.config.timeout_seconds ?? this.opts.defaultTimeoutSeconds ?? null,
        logger: this.logger,
      });
      const retryDelaysMs = this.opts.storeRetryDelaysMs;
      const trace = this.tracer.traceAttempt({
        rolloutId: rid,
        attemptId: aid,
        store: this.store,
        ...(retryDelaysMs ? { retryDelaysMs } : {}),
      });
      const agentRun = (async () => {
        const resources = await loadAttemptResources(this.store, attempted);
        const context = buildRolloutContext(
          attempted,
          resources,
          agentController.signal,
          this.logger,
          this.mintAttemptToken?.(attempted),
        );
        const method = attempted.mode === "train" ? "trainingRollout" : "validationRollout";
        return trace.run(() =>
          withRolloutSpan(this.tracer, trace, attempted, () => this.agent[method](attempted.input, context)),
        );
      })().then(
        (result) => ({ ok: true as const, result }),
        (error: unknown) => ({ ok: false as const, error }),
      );
      const first = await Promise.race([agentRun, watch.ended]);
      if ("reason" in first) return await this.abortEndedAttempt(attempted, first, agentController, agentRun);
      let failure: unknown;
      let hasFailure = false;
      if (first.ok) {
        try {
          recordAgentResult(first.result, trace, this.logger);
        } catch (error) {
          failure = error;
          hasFailure = true;
        }
      } else {
        failure = first.error;
        hasFailure = true;
      }
      if (hasFailure) trace.addCoreFields(emitException(failure, { propagate: false }));
      await trace.flush();
      if (abandoned()) return { status: "abandoned" };
      // A result without all its spans is not a success: fail it so the retry policy applies.
      const unstored = trace.unacknowledgedCount;
      if (unstored > 0 && !hasFailure) {
        failure = new SpansNotStoredError(rid, aid, unstored);
        hasFailure = true;
      }
      const finish = { retryDelaysMs };
      return hasFailure
        ? await finishAttempt(this.store, this.logger, attempted, "failed", failure, finish)
        : await finishAttempt(this.store, this.logger, attempted, "succeeded", undefined, finish);
    } finally {
      watch?.stop();
      options.signal?.removeEventListener("abort", onOuterAbort);
    }
  }

  /**
   * The store (or the deadline) ended an attempt whose agent is still running: abort the agent's signal
   * at once and give it the grace period to return; past that it is abandoned so its slot frees up.
   */
  private async abortEndedAttempt(
    attempted: AttemptedRollout,
    end: AttemptEnd,
    controller: AbortController,
    agentRun: Promise<unknown>,
  ): Promise<AttemptOutcome> {
    const error = attemptEndedError(attempted, end);
    this.logger.warn(`${error.message}; aborting the agent`);
    controller.abort(error);
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<"grace">((resolve) => {
      timer = setTimeout(() => resolve("grace"), this.opts.gracePeriodMs);
    });
    const settled = await Promise.race([agentRun.then(() => "done" as const), grace]);
    clearTimeout(timer);
    if (settled === "grace") {
      this.logger.warn(
        `agent of rollout ${attempted.rollout_id} ignored its abort signal for ${this.opts.gracePeriodMs} ms; abandoned, its slot is free again`,
      );
      return { status: "stale", reason: end.reason, abandoned: true };
    }
    return { status: "stale", reason: end.reason };
  }

  private async claim(limit: number): Promise<AttemptedRollout[]> {
    try {
      const claimed =
        limit === 1
          ? await this.store.dequeueRollout({ workerId: this.workerId }).then((one) => (one ? [one] : []))
          : await this.store.dequeueManyRollouts({ limit, workerId: this.workerId });
      this.claimRetry.succeeded();
      return claimed;
    } catch (error) {
      // A store that refuses our credentials will not change its mind: stop instead of retrying.
      if (isAuthFailure(error)) throw error;
      this.claimRetry.failed(error);
      return [];
    }
  }

  private launch(attempted: AttemptedRollout, summary: RunnerSummary): void {
    const controller = new AbortController();
    const entry: InFlight = {
      attempted,
      controller,
      abandoned: false,
      done: Promise.resolve({ status: "abandoned" }),
    };
    const key = attempted.attempt.attempt_id;
    entry.done = this.executeRollout(attempted, {
      signal: controller.signal,
      isAbandoned: () => entry.abandoned,
    })
      .catch((error): AttemptOutcome => {
        this.logger.error(`rollout ${attempted.rollout_id} could not be run`, error);
        return { status: "failed", error };
      })
      .then((outcome) => {
        if (!entry.abandoned) {
          if (outcome.status === "succeeded") summary.succeeded++;
          else if (outcome.status === "failed") summary.failed++;
          else if (outcome.status === "stale") {
            summary.stale++;
            if (outcome.abandoned) summary.abandoned++;
          }
        }
        this.inflight.delete(key);
        this.wake();
        return outcome;
      });
    this.inflight.set(key, entry);
  }

  private async drainWithGrace(summary: RunnerSummary): Promise<void> {
    if (this.inflight.size === 0) return;
    const all = Promise.all([...this.inflight.values()].map((f) => f.done));
    let timer: NodeJS.Timeout | undefined;
    const grace = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), this.opts.gracePeriodMs);
    });
    const first = await Promise.race([all, grace]);
    clearTimeout(timer);
    if (first !== "timeout") return;
    summary.abandoned += await this.abandonInFlight();
  }

  /**
   * Give up on every in-flight rollout now: abort the agents' signals and mark the attempts failed (so
   * the store can retry them elsewhere). For a process that must exit while it still holds rollouts;
   * resolves with how many it gave up.
   */
  async abandonInFlight(): Promise<number> {
    const left = [...this.inflight.values()].filter((entry) => !entry.abandoned);
    await Promise.all(
      left.map(async (entry) => {
        entry.abandoned = true;
        entry.controller.abort(new Error(`runner ${this.workerId} stopped`));
        await markAbandoned(this.store, this.logger, entry.attempted, this.workerId);
        this.inflight.delete(entry.attempted.attempt.attempt_id);
      }),
    );
    return left.length;
  }

  private async workerHeartbeat(): Promise<void> {
    try {
      await this.store.updateWorker(this.workerId, { heartbeat_stats: systemSnapshot() });
    } catch (error) {
      this.logger.debug(`worker heartbeat of ${this.workerId} failed`, error);
    }
  }

  /** Sleep up to `ms`, waking early when a slot frees up or the run is aborted. */
  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        this.wake = () => {};
        resolve();
      };
      this.wake = done;
      if (Number.isFinite(ms)) timer = setTimeout(done, ms);
    });
  }

  private jitter(ms: number): number {
    return ms * (0.75 + Math.random() * 0.5);
  }
}
