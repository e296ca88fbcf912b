import { z } from "zod";
import { type Adapter, isAdapter } from "../adapter.js";
import { toLitAgent } from "../agent/rollout.js";
import type { AgentLike } from "../agent/types.js";
import { InvalidArgumentError } from "../errors.js";
import { consoleLogger, isLogger, type Logger, silentLogger } from "../logger.js";
import { isLightningStore, parseOptions } from "../options.js";
import { Runner, RunnerOptionsSchema, type RunnerSummary } from "../runner/runner.js";
import { InMemoryLightningStore } from "../store/memory-store.js";
import type { LightningStore } from "../store/store.js";
import { LightningTracer } from "../tracing/tracer.js";
import { type NamedResources, NamedResourcesSchema } from "../types/resources.js";
import { parseOrThrow } from "../types/validate.js";
import { type Algorithm, isAlgorithm } from "./algorithm.js";
import { Baseline, type BaselineSummary } from "./baseline.js";
import { formatDevReport } from "./dev-report.js";

export const TrainerOptionsSchema = z.object({
  /** What `fit` runs; `dev` uses it only if it is `fast`, else a Baseline. Default: Baseline. */
  algorithm: z.custom<Algorithm>(isAlgorithm, "must have a run(context) method").optional(),
  /** Default: a new InMemoryLightningStore. */
  store: z.custom<LightningStore>(isLightningStore, "must be a LightningStore").optional(),
  /**
   * In-process runner loops sharing the store. 0: none; rollouts then come only from runners elsewhere
   * (`agl-worker` processes on other machines claiming from the same store server).
   */
  nRunners: z.number().int().min(0).default(1),
  /** Rollouts each runner runs at the same time. */
  runnerConcurrency: z.number().int().min(1).default(1),
  adapter: z.custom<Adapter<any, any>>(isAdapter, "must have an adapt(input) method").optional(),
  initialResources: NamedResourcesSchema.optional(),
  /** Per runner: stop after claiming this many rollouts. */
  maxRollouts: z.number().int().min(1).optional(),
  /** How often idle runners look for work. */
  pollIntervalMs: z.number().min(0).default(50),
  heartbeatIntervalSeconds: z.number().positive().default(10),
  /** Extra time runners give in-flight rollouts when the algorithm is done or the trainer is stopped. */
  gracePeriodMs: z.number().min(0).default(5000),
  /**
   * Passed to the runners (see RunnerOptions.proxyTokenSecret) unless the algorithm supplies its own
   * through `runnerCredentials()`, which wins: it owns the proxy that will check the tokens.
   */
  proxyTokenSecret: RunnerOptionsSchema.shape.proxyTokenSecret,
  /**
   * Deadline of each `dev()` rollout that has no `timeout_seconds` of its own: a hung agent is aborted
   * and reported instead of hanging the smoke test. Default 300 s; null for none.
   */
  devTimeoutSeconds: z.number().positive().nullable().default(300),
  /**
   * Where `dev()` prints its summary table: a function receiving the text, or false for none. Default:
   * stderr, unless `logger` is `silentLogger`.
   */
  devReport: z
    .union([z.literal(false), z.custom<(text: string) => void>((v) => typeof v === "function")])
    .optional(),
  tracer: z.custom<LightningTracer>(LightningTracer.isInstance, "must be a LightningTracer").optional(),
  logger: z.custom<Logger>(isLogger, "must have debug/info/warn/error methods").optional(),
});
export type TrainerOptions = z.input<typeof TrainerOptionsSchema>;

/** What an algorithm's `run` resolves to. */
export type AlgorithmResult<A> = A extends Algorithm<any, infer R> ? R : never;
/** What `fit()` returns for a trainer configured with `A` (a Baseline when none). */
export type FitResultOf<A> = undefined extends A ? BaselineSummary : AlgorithmResult<A>;
/** What `dev()` returns: the configured algorithm's result when it is `fast: true`, else Baseline's. */
export type DevResultOf<A> = undefined extends A
  ? BaselineSummary
  : [A] extends [{ readonly fast: true }]
    ? AlgorithmResult<A>
    : BaselineSummary;

export interface FitResult<R> {
  /** What the algorithm returned. */
  result: R;
  runners: RunnerSummary[];
}

/**
 * Wires an algorithm, a store and in-process runners together. With no options it runs everything in
 * one process on an in-memory store:
 *
 * ```ts
 * const trainer = new Trainer({ initialResources: { main_llm: llm({...}) } });
 * const { result } = await trainer.dev(agent, tasks);
 * ```
 */
export class Trainer<A extends Algorithm<any, any> | undefined = Algorithm<any, any> | undefined> {
  readonly store: LightningStore;
  readonly logger: Logger;
  private readonly opts: z.output<typeof TrainerOptionsSchema>;
  private readonly tracer: LightningTracer;

  constructor(options: Omit<TrainerOptions, "algorithm"> & { algorithm?: A } = {}) {
    this.opts = parseOptions(TrainerOptionsSchema, options, "trainer");
    this.store = this.opts.store ?? new InMemoryLightningStore();
    this.logger = this.opts.logger ?? consoleLogger();
    this.tracer = this.opts.tracer ?? new LightningTracer({ logger: this.logger });
  }

  /**
   * Train: run the algorithm while `nRunners` runners (and any remote workers) execute its rollouts.
   * With `nRunners: 0` the agent may be null: it runs only in the workers.
   */
  async fit<T, R = FitResultOf<A>>(
    agent: AgentLike<T> | null,
    trainDataset: readonly T[],
    options: { valDataset?: readonly T[]; signal?: AbortSignal } = {},
  ): Promise<FitResult<R>> {
    if (!this.opts.algorithm) {
      this.logger.warn(
        "fit() without an algorithm runs a Baseline: every task once, nothing is trained. Pass `algorithm` (e.g. PPO from @agl/trainer-gpu) to train, or call dev() for a smoke test",
      );
    }
    const algorithm = (this.opts.algorithm ?? new Baseline()) as Algorithm<T, R>;
    return this.execute(algorithm, agent, trainDataset, options);
  }

  /** Smoke-test an agent: the configured algorithm if it is fast, else a Baseline over `dataset`. */
  async dev<T, R = DevResultOf<A>>(
    agent: AgentLike<T>,
    dataset: readonly T[],
    options: { valDataset?: readonly T[]; signal?: AbortSignal } = {},
  ): Promise<FitResult<R>> {
    const configured = this.opts.algorithm;
    const algorithm = (configured?.fast ? configured : new Baseline()) as Algorithm<T, R>;
    const started = performance.now();
    const out = await this.execute(algorithm, agent, dataset, options, this.opts.devTimeoutSeconds);
    const report =
      this.opts.devReport ??
      (this.logger === silentLogger ? false : (text: string) => void process.stderr.write(text));
    if (report) report(formatDevReport(out.result, out.runners, (performance.now() - started) / 1000));
    return out;
  }

  private proxyTokenSecretFor(algorithm: Algorithm<any, any>): string | undefined {
    const fromAlgorithm = algorithm.runnerCredentials?.().proxyTokenSecret;
    if (fromAlgorithm === undefined) return this.opts.proxyTokenSecret;
    return parseOrThrow(
      RunnerOptionsSchema.shape.proxyTokenSecret,
      fromAlgorithm,
      "algorithm.runnerCredentials().proxyTokenSecret",
    );
  }

  private async execute<T, R>(
    algorithm: Algorithm<T, R>,
    agent: AgentLike<T> | null,
    trainDataset: readonly T[],
    options: { valDataset?: readonly T[]; signal?: AbortSignal },
    defaultTimeoutSeconds: number | null = null,
  ): Promise<FitResult<R>> {
    if (agent !== null || this.opts.nRunners > 0) toLitAgent(agent as AgentLike<T>);
    if (!Array.isArray(trainDataset))
      throw new InvalidArgumentError("trainDataset", "must be an array of tasks");
    if (options.valDataset !== undefined && !Array.isArray(options.valDataset)) {
      throw new InvalidArgumentError("valDataset", "must be an array of tasks");
    }
    const controller = new AbortController();
    const onOuterAbort = () => controller.abort(options.signal?.reason);
    options.signal?.addEventListener("abort", onOuterAbort);
    const proxyTokenSecret = this.proxyTokenSecretFor(algorithm);
    const runnersController = new AbortController();
    const runners = Array.from(
      { length: this.opts.nRunners },
      (_, i) =>
        new Runner({
          store: this.store,
          agent: agent as AgentLike<T>,
          workerId: `Worker-${i}`,
          concurrency: this.opts.runnerConcurrency,
          pollIntervalMs: this.opts.pollIntervalMs,
          heartbeatIntervalSeconds: this.opts.heartbeatIntervalSeconds,
          gracePeriodMs: this.opts.gracePeriodMs,
          maxRollouts: this.opts.maxRollouts,
          defaultTimeoutSeconds,
          ...(proxyTokenSecret === undefined ? {} : { proxyTokenSecret }),
          tracer: this.tracer,
          logger: this.logger,
        }),
    );
    if (runners.length === 0) {
      this.logger.info(
        `trainer: no in-process runners; ${algorithm.name ?? "the algorithm"} waits for remote workers to claim its rollouts`,
      );
    }
    const runs = runners.map((r) => r.run({ signal: runnersController.signal }));
    try {
      const result = await algorithm.run({
        store: this.store,
        adapter: this.opts.adapter,
        trainDataset,
        valDataset: options.valDataset,
        initialResources: this.opts.initialResources as NamedResources | undefined,
        signal: controller.signal,
        logger: this.logger,
      });
      runnersController.abort();
      return { result, runners: await Promise.all(runs) };
    } catch (error) {
      runnersController.abort();
      await Promise.allSettled(runs);
      throw error;
    } finally {
      options.signal?.removeEventListener("abort", onOuterAbort);
    }
  }
}
