import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { ProxySpansToTriplets } from "@agl/adapter";
import {
  type Adapter,
  type Algorithm,
  type AlgorithmContext,
  generateTokenSecret,
  InvalidArgumentError,
  type NamedResources,
  parseOrThrow,
  type RunnerCredentials,
  type Span,
  type Triplet,
} from "@agl/core";
import { LLMProxy } from "@agl/proxy";
import type { PolicyWorkers } from "../parallel/pool.js";
import { defaultModelName } from "../server/policy-server.js";
import { savePPOCheckpoint } from "./checkpoint.js";
import { CollectAbortedError, collectRollouts } from "./collect.js";
import { type PPOConfig, type PPOConfigInput, parsePPOConfig } from "./config.js";
import { MetricsLog, type MetricsRecord } from "./metrics-log.js";
import { AdamW } from "./optim.js";
import { PolicySet, type PolicySpecs } from "./policies.js";
import { type PPOProxyOptions, PPOProxyOptionsSchema } from "./proxy-options.js";
import { deriveSeed, SeededRandom } from "./rng.js";
import {
  pauseForUpdate,
  resumeFromCheckpoint,
  summarize,
  type ValidationResult,
  warnIgnoredKeys,
} from "./run-support.js";

export type { ValidationResult } from "./run-support.js";

import { fitMicroBatch } from "../pretrained/memory-fit.js";
import { type PolicyBundle, type ServeFn, servePolicy } from "./serving.js";
import { mapStepRewards, microBatchFitOptions, ppoUpdate, type RewardMapper } from "./step.js";
import { ValueHead } from "./value-head.js";

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

  constructor(private readonly options: PPOOptions) {
    this.config = parsePPOConfig(options.config ?? {});
    parseOrThrow(PPOProxyOptionsSchema, options.proxy ?? {}, "proxy");
    if (options.workers && options.workers.model !== options.policy.model) {
      throw new InvalidArgumentError("workers", "the worker pool must be started with policy.model");
    }
    this.proxyTokenSecret =
      options.proxy?.tokenSecret || process.env.AGL_PROXY_TOKEN_SECRET || generateTokenSecret();
  }

  runnerCredentials(): RunnerCredentials {
    return { proxyTokenSecret: this.proxyTokenSecret };
  }

  async run(context: AlgorithmContext<T>): Promise<PPOResult> {
    const started = performance.now();
    const c = this.config;
    const { store, logger } = context;
    const { model } = this.options.policy;
    const root = resolve(c.trainer.default_local_dir);
    const modelName = this.options.modelName ?? defaultModelName(this.options.policy.model, "policy");
    const threshold = this.options.successThreshold ?? 1;
    const adapter: Pick<Adapter<Span[], Triplet[]>, "adapt"> = (context.adapter as
      | Adapter<Span[], Triplet[]>
      | undefined) ?? new ProxySpansToTriplets();
    const train = context.trainDataset;
    const val = context.valDataset ?? [];
    const batchSize = Math.min(c.data.train_batch_size, train.length);
    const stepsPerEpoch = Math.floor(train.length / Math.max(1, batchSize));
    const totalSteps = c.trainer.total_training_steps ?? stepsPerEpoch * c.trainer.total_epochs;
    const padId = this.options.policy.tokenizer.padId;

    const needRef = c.actor_rollout_ref.actor.use_kl_loss || c.algorithm.use_kl_in_reward;
    const reference = needRef ? model.frozenReference() : null;
    const optim = c.actor_rollout_ref.actor.optim;
    const optimizer = new AdamW(model.trainableVariables, {
      betas: optim.betas,
      eps: optim.eps,
      weightDecay: optim.weight_decay,
    });
    // Before any rollout: the actor's micro-batch at the longest allowed row must fit in memory (the WASM
    // heap); ppoUpdate shrinks it per update when needed, and a single row that cannot fit fails here.
    const fit = fitMicroBatch(
      model,
      microBatchFitOptions(c, c.data.max_prompt_length + c.data.max_response_length, 0),
    );
    if (fit.rows < c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu)
      logger.warn(
        `ppo: micro-batches of ${fit.rows} rows at the longest rows (${c.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu} would not fit in memory)`,
      );
    if (this.options.policies && this.options.workers)
      throw new InvalidArgumentError("workers", "multi-policy runs train in this thread");
    const policySet = this.options.policies ? new PolicySet(model, this.options.policies, c) : null;
    const valueHead =
      c.algorithm.adv_estimator === "gae"
        ? new ValueHead(model.config.dModel, c.critic.hidden_size, c.trainer.seed)
        : null;

    warnIgnoredKeys(this.options.config, logger);
    // Resume: weights, optimizer moments, critic and step; every random draw derives from (seed, step).
    let step = 0;
    let previous: MetricsRecord[] = [];
    if (c.trainer.resume_mode === "auto") {
      const resumed = await resumeFromCheckpoint(root, {
        model,
        reference,
        optimizer,
        valueHead,
        config: c,
        logger,
      });
      if (resumed) ({ step, history: previous } = resumed);
      if (resumed && policySet) await policySet.restore(resumed.dir);
    }

    const jsonlPath = c.trainer.logger.includes("jsonl") ? join(root, "metrics.jsonl") : null;
    const plotPath = join(root, "reward.svg");
    const log = new MetricsLog({
      jsonlPath,
      plotPath,
      progress: c.trainer.logger.includes("progress"),
      console: c.trainer.logger.includes("console"),
      totalSteps,
      title: `${c.trainer.project_name}/${c.trainer.experiment_name}: reward`,
    });

    const stop = new AbortController();
    const onContextAbort = () => stop.abort();
    context.signal.addEventListener("abort", onContextAbort);
    const onSignal = () => {
      logger.warn("PPO: interrupted; saving a checkpoint and stopping");
      stop.abort();
    };
    if (this.options.handleSignals ?? true) {
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
    }

    const serve = this.options.serve ?? this.options.workers?.serve ?? servePolicy;
    const server = await serve(this.options.policy, { modelName });
    // Control routes are guarded by a per-run admin token; LLM routes require a token scoped to the
    // calling attempt, which the runners mint with `proxyTokenSecret` (see runnerCredentials) and hand
    // to the agent as its ProxyLLM's api_key, so no agent can write into another rollout's trace.
    const proxy = new LLMProxy({
      store,
      backends: [
        {
          url: server.url,
          ...(server.servedModel ? { model: server.servedModel() } : {}),
          ...(server.apiKey ? { apiKey: server.apiKey } : {}),
        },
      ],
      host: this.options.proxy?.host,
      port: this.options.proxy?.port,
      publicUrl: this.options.proxy?.publicUrl ?? null,
      model: modelName,
      ...(policySet ? { policies: policySet.proxyRoutes(modelName, server.servedModels?.()) } : {}),
      adminToken: randomBytes(24).toString("hex"),
      llmAuth: "token",
      tokenSecret: this.proxyTokenSecret,
      healthCheckIntervalMs: 0,
      logger: { warn: (m) => logger.info(`proxy: ${m}`), error: (m) => logger.error(`proxy: ${m}`) },
    });
    await proxy.start();
    logger.info(`PPO: LLM proxy on ${proxy.url}, published to agents as ${proxy.publicUrl}/v1`);
    const resourceName = this.options.resourceName ?? "main_llm";
    const extra: NamedResources = Object.fromEntries(
      Object.entries(context.initialResources ?? {}).filter(([, r]) => r.resource_type === "prompt_template"),
    );
    const rollout = c.actor_rollout_ref.rollout;
    const sampling = (k: { temperature: number; top_p: number; top_k: number }) => ({
      temperature: k.temperature,
      top_p: k.top_p,
      ...(k.top_k > 0 ? { top_k: k.top_k } : {}),
      max_tokens: c.data.max_response_length,
    });
    // One LLM resource per policy (`planner_llm` asking for model "planner"), beside the main one.
    const llms = { [resourceName]: modelName, ...policySet?.resourceNames() };
    const resources = (k: Parameters<typeof sampling>[0]) =>
      Object.fromEntries(
        Object.entries(llms).map(([name, m]) => [
          name,
          proxy.asResource({ model: m, samplingParameters: sampling(k) }),
        ]),
      );
    await store.updateResources("ppo-train", { ...extra, ...resources(rollout) });
    await store.updateResources("ppo-val", { ...extra, ...resources(rollout.val_kwargs) });

    const validate = async (atStep: number): Promise<ValidationResult | null> => {
      if (val.length === 0) return null;
      const t0 = performance.now();
      const count = Math.min(c.data.val_batch_size ?? val.length, val.length);
      const total = count * rollout.val_kwargs.n;
      logger.info(`PPO: validation at step ${atStep}: ${total} rollouts`);
      let lastLog = t0;
      const collected = await collectRollouts({
        store,
        adapter,
        samples: val.slice(0, count).map((task, index) => ({ index, task })),
        n: rollout.val_kwargs.n,
        mode: "val",
        resourcesId: "ppo-val",
        timeoutSeconds: rollout.timeout_seconds,
        pollSeconds: c.agentlightning.poll_interval_seconds,
        seedOf: (i, r) => deriveSeed(c.trainer.seed, 1_000_003, atStep, i, r),
        dataIdOf: (i) => `val-${atStep}-${i}`,
        signal: stop.signal,
        beforeAdapt: () => proxy.flush(),
        // A slow agent (or one generating to the context limit) must show up in the log, not as silence.
        onProgress: (ended, all) => {
          const now = performance.now();
          if (ended < all && now - lastLog < 10_000) return;
          lastLog = now;
          logger.info(
            `PPO: validation at step ${atStep}: ${ended}/${all} rollouts ended (${((now - t0) / 1000).toFixed(1)} s)`,
          );
        },
      });
      const result = summarize(collected, threshold);
      log.record(atStep, {
        "val/reward": result.reward,
        "val/accuracy": result.accuracy,
        "val/n_rollouts": result.n,
        "timing_s/testing": (performance.now() - t0) / 1000,
      });
      return result;
    };

    let initialValidation: ValidationResult | null = null;
    let finalValidation: ValidationResult | null = null;
    let aborted = false;
    let failed = false;
    let checkpointDir: string | null = null;
    const save = async () => {
      checkpointDir = await savePPOCheckpoint(root, {
        ...this.options.policy,
        optimizer: optimizer.getState(),
        reference,
        critic: valueHead?.getState() ?? null,
        state: { step, history: log.history, config: c },
        ...(policySet ? { saveExtra: (dir: string) => policySet.save(dir) } : {}),
      });
    };

    log.start(step, previous);
    try {
      if (c.trainer.val_before_train && step === 0) initialValidation = await validate(0);
      while (step < totalSteps) {
        if (stop.signal.aborted) throw new CollectAbortedError();
        const next = step + 1;
        const t0 = performance.now();
        const epoch = Math.floor(step / Math.max(1, stepsPerEpoch));
        const order = train.map((_, i) => i);
        if (c.data.shuffle) new SeededRandom(deriveSeed(c.trainer.seed, 7, epoch)).shuffle(order);
        const offset = (step % Math.max(1, stepsPerEpoch)) * batchSize;
        const indices = order.slice(offset, offset + batchSize);
        const collected = await collectRollouts({
          store,
          adapter,
          samples: indices.map((index) => ({ index, task: train[index]! })),
          n: rollout.n,
          mode: "train",
          resourcesId: "ppo-train",
          timeoutSeconds: rollout.timeout_seconds,
          pollSeconds: c.agentlightning.poll_interval_seconds,
          seedOf: (i, r) => deriveSeed(c.trainer.seed, next, i, r),
          dataIdOf: (i) => `train-${next}-${i}`,
          signal: stop.signal,
          beforeAdapt: () => proxy.flush(),
        });
        const tGen = (performance.now() - t0) / 1000;
        // No call may be sampled while weights change: the proxy turns new calls away (429 + Retry-After,
        // which SDKs retry) and drains its in-flight calls (their spans written), and the server drains
        // running generations before the update runs.
        const pauseMetrics = await pauseForUpdate(proxy, logger);
        const rng = new SeededRandom(deriveSeed(c.trainer.seed, next, 99));
        const summary = summarize(collected, threshold);
        const rewardsOverride = this.options.mapRewards
          ? mapStepRewards(collected, c, this.options.mapRewards, {
              step: next,
              rng: new SeededRandom(deriveSeed(c.trainer.seed, next, 98)),
            })
          : undefined;
        let metrics: Record<string, number> = {};
        const version = await server.swapWeights(async () => {
          if (policySet) {
            metrics = await policySet.update(collected, c, padId, rng, totalSteps, rewardsOverride);
            return;
          }
          metrics = await ppoUpdate(
            collected,
            c,
            { policy: model, reference, optimizer, valueHead, padId, workers: this.options.workers },
            rng,
            totalSteps,
            rewardsOverride,
          );
        });
        // An external engine may serve the new version under a new name (one LoRA adapter per version):
        // every call from here on asks for it.
        if (server.servedModel) proxy.setBackendModel(server.servedModel());
        if (policySet && server.servedModels)
          for (const [p, route] of Object.entries(policySet.proxyRoutes(modelName, server.servedModels())))
            proxy.setPolicyModel(p, route.model);
        await proxy.resume({ modelVersion: version });
        step = next;
        const seconds = (performance.now() - t0) / 1000;
        Object.assign(metrics, pauseMetrics, {
          "training/reward": summary.reward,
          "training/accuracy": summary.accuracy,
          "training/n_rollouts": summary.n,
          "training/epoch": epoch,
          "timing_s/gen": tGen,
          "timing_s/step": seconds,
          "perf/throughput": (metrics["training/n_tokens"] ?? 0) / seconds,
        });
        log.record(step, metrics);
        this.options.onStep?.(step, metrics);
        const last = step === totalSteps;
        if (c.trainer.test_freq > 0 && (step % c.trainer.test_freq === 0 || last)) {
          finalValidation = await validate(step);
        }
        if (c.trainer.save_freq > 0 && step % c.trainer.save_freq === 0) await save();
        if (this.options.stopAfterStep !== undefined && step >= this.options.stopAfterStep) break;
      }
    } catch (error) {
      if (!(error instanceof CollectAbortedError)) {
        failed = true;
        throw error;
      }
      aborted = true;
    } finally {
      context.signal.removeEventListener("abort", onContextAbort);
      process.removeListener("SIGINT", onSignal);
      process.removeListener("SIGTERM", onSignal);
      log.stop();
      // After a completed step or an abort between steps the weights match `step` exactly; after a
      // failure inside an update they may not, so no checkpoint is written then.
      if (!failed) {
        await save().catch((e) =>
          logger.error(`PPO: saving the final checkpoint failed: ${(e as Error).message}`),
        );
      }
      await proxy.stop();
      await server.close();
      reference?.dispose();
      optimizer.dispose();
      policySet?.dispose();
      valueHead?.optimizer.dispose();
    }
    log.writePlot();
    return {
      stepsCompleted: step,
      initialValidation,
      finalValidation,
      history: log.history,
      aborted,
      checkpointDir,
      metricsPath: jsonlPath,
      plotPath,
      seconds: (performance.now() - started) / 1000,
    };
  }
}
