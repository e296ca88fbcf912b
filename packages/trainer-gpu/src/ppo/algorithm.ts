import {
  type Algorithm,
  type AlgorithmContext,
  generateTokenSecret,
  InvalidArgumentError,
  parseOrThrow,
  type RunnerCredentials,
} from "@agl/core";
import type { PolicyWorkers } from "../parallel/pool.js";
import { runAsyncLoop } from "./async-loop.js";
import { CollectAbortedError } from "./collect.js";
import { type PPOConfig, type PPOConfigInput, parsePPOConfig } from "./config.js";
import type { LoopHooks } from "./loop-support.js";
import type { MetricsRecord } from "./metrics-log.js";
import type { PolicySpecs } from "./policies.js";
import { type PPOProxyOptions, PPOProxyOptionsSchema } from "./proxy-options.js";
import { setupRun } from "./run-context.js";
import type { ValidationResult } from "./run-support.js";
import type { PolicyBundle, ServeFn } from "./serving.js";
import type { RewardMapper } from "./step.js";
import { runSyncLoop } from "./sync-loop.js";
import { validate } from "./validation.js";

export type { ValidationResult } from "./run-support.js";

export interface PPOOptions {
  config?: PPOConfigInput;
  /** The LLM proxy's bind address, public URL and token secret (see PPOProxyOptions). */
  proxy?: PPOProxyOptions;
  policy: PolicyBundle;
  /**
   * Starts the policy server (default `servePolicy`, in process); the trainer puts an `LLMProxy` in front
   * of it. `externalEngine({ url, weightSync })` uses a vLLM/SGLang server instead.
   */
  serve?: ServeFn;
  /**
   * Worker threads holding replicas of `policy.model` (`startPolicyWorkers(policy)`): the actor's
   * micro-batch gradients are computed on them, and, unless `serve` is given, generation runs on them
   * too (`workers.serve`). The caller closes the pool. Default: everything in this thread.
   */
  workers?: PolicyWorkers;
  /** Model name agents see (default: a loaded checkpoint's name, else "policy"). */
  modelName?: string;
  /** Resource name of the published ProxyLLM (default "main_llm", as in Agent Lightning). */
  resourceName?: string;
  /** A rollout whose final reward is >= this counts as a success for `*\/accuracy` (default 1). */
  successThreshold?: number;
  /** Save a checkpoint and stop cleanly on SIGINT/SIGTERM (default true). */
  handleSignals?: boolean;
  /** Stop (with a checkpoint) after this step, as if interrupted; for resume tests and staged runs. */
  stopAfterStep?: number;
  /** Called after every step with its metrics. */
  onStep?: (step: number, metrics: Record<string, number>) => void;
  /**
   * Replace the rewards a step trains on (reward shaping, or a control experiment such as shuffling
   * rewards across the step's rollouts). Called with the training reward of every rollout that enters the
   * batch (see `failed_rollouts`), in (sample, repeat) order; must return as many finite numbers. The
   * `training/reward` metrics still report the rewards the agents earned.
   */
  mapRewards?: RewardMapper;
  /**
   * Several trainable policies (one LoRA adapter per agent role, see policies.ts): policy name → how it
   * is served, published (`<name>_llm`), rewarded and trained. `policy.model` must have each adapter.
   */
  policies?: PolicySpecs;
  /**
   * The training loop. Default: "async" when `rollout.max_staleness` > 0, else "sync". "async" with
   * max_staleness 0 runs the asynchronous scheduler and publication with no lag, which trains exactly
   * what the synchronous loop trains (for comparisons and tests).
   */
  loop?: "sync" | "async";
}

export interface PPOResult {
  stepsCompleted: number;
  /** Validation before training (null when `val_before_train` is off or there is no validation set). */
  initialValidation: ValidationResult | null;
  finalValidation: ValidationResult | null;
  history: MetricsRecord[];
  aborted: boolean;
  checkpointDir: string | null;
  metricsPath: string | null;
  plotPath: string;
  seconds: number;
}

/**
 * PPO/GRPO as an Algorithm for the core Trainer, following Agent Lightning's VERL data flow: serve the
 * policy behind the LLM proxy, publish a ProxyLLM, enqueue each sample `rollout.n` times under one
 * data_id, wait, adapt spans to triplets, build the batch, compute advantages, update, then swap the
 * new weights in while the proxy is paused, and validate every `test_freq` steps.
 */
export class PPO<T = unknown> implements Algorithm<T, PPOResult> {
  readonly name = "PPO";
  readonly config: PPOConfig;

  /**
   * Secret of the per-attempt tokens the proxy requires on its LLM routes. Fixed here, not in `run`,
   * because the Trainer hands it to its runners before `run` starts the proxy. Remote `agl-worker`s get
   * it by sharing $AGL_PROXY_TOKEN_SECRET (or `proxy.tokenSecret`) with this process.
   */
  private readonly proxyTokenSecret: string;
  private readonly asyncLoop: boolean;

  constructor(private readonly options: PPOOptions) {
    this.config = parsePPOConfig(options.config ?? {});
    parseOrThrow(PPOProxyOptionsSchema, options.proxy ?? {}, "proxy");
    if (options.workers && options.workers.model !== options.policy.model) {
      throw new InvalidArgumentError("workers", "the worker pool must be started with policy.model");
    }
    const k = this.config.actor_rollout_ref.rollout.max_staleness;
    if (options.loop === "sync" && k > 0)
      throw new InvalidArgumentError("loop", `"sync" cannot train with max_staleness ${k} > 0`);
    this.asyncLoop = k > 0 || options.loop === "async";
    if (this.asyncLoop && options.workers) {
      // Their replicas both generate and compute the actor's gradients: they cannot serve older weights
      // while the trainer updates.
      throw new InvalidArgumentError(
        "workers",
        "asynchronous training (max_staleness > 0) does not run on a worker pool",
      );
    }
    if (options.policies && (options.workers || this.asyncLoop))
      throw new InvalidArgumentError(
        "policies",
        "multi-policy runs train in this thread with the synchronous loop (no workers, max_staleness 0)",
      );
    this.proxyTokenSecret =
      options.proxy?.tokenSecret || process.env.AGL_PROXY_TOKEN_SECRET || generateTokenSecret();
  }

  runnerCredentials(): RunnerCredentials {
    return { proxyTokenSecret: this.proxyTokenSecret };
  }

  async run(context: AlgorithmContext<T>): Promise<PPOResult> {
    const started = performance.now();
    const o = this.options;
    const run = await setupRun(context, {
      config: this.config,
      rawConfig: o.config,
      proxy: o.proxy,
      proxyTokenSecret: this.proxyTokenSecret,
      policy: o.policy,
      serve: o.serve,
      workers: o.workers,
      modelName: o.modelName,
      resourceName: o.resourceName,
      handleSignals: o.handleSignals,
      asyncLoop: this.asyncLoop,
      policies: o.policies,
    });
    const hooks: LoopHooks = {
      threshold: o.successThreshold ?? 1,
      mapRewards: o.mapRewards,
      onStep: o.onStep,
      stopAfterStep: o.stopAfterStep,
    };
    let initialValidation: ValidationResult | null = null;
    let finalValidation: ValidationResult | null = null;
    let aborted = false;
    let failed = false;
    run.log.start(run.step, run.previous);
    try {
      if (this.config.trainer.val_before_train && run.step === 0)
        initialValidation = await validate(run, 0, hooks.threshold);
      await (this.asyncLoop ? runAsyncLoop : runSyncLoop)(run, hooks, (v) => {
        finalValidation = v;
      });
    } catch (error) {
      if (!(error instanceof CollectAbortedError)) {
        failed = true;
        throw error;
      }
      aborted = true;
    } finally {
      run.log.stop();
      // After a completed step or an abort between steps the weights match `step` exactly; after a
      // failure inside an update they may not, so no checkpoint is written then.
      if (!failed) {
        await run
          .save()
          .catch((e) =>
            context.logger.error(`PPO: saving the final checkpoint failed: ${(e as Error).message}`),
          );
      }
      await run.close();
    }
    run.log.writePlot();
    return {
      stepsCompleted: run.step,
      initialValidation,
      finalValidation,
      history: run.log.history,
      aborted,
      checkpointDir: run.checkpointDir,
      metricsPath: run.jsonlPath,
      plotPath: run.plotPath,
      seconds: (performance.now() - started) / 1000,
    };
  }
}
