import { randomBytes } from "node:crypto";
import { join, resolve } from "node:path";
import { ProxySpansToTriplets } from "@agl/adapter";
import type { Adapter, AlgorithmContext, NamedResources, Span, Triplet } from "@agl/core";
import { LLMProxy } from "@agl/proxy";
import { fitMicroBatch } from "../pretrained/memory-fit.js";
import { defaultModelName } from "../server/policy-server.js";
import { savePPOCheckpoint } from "./checkpoint.js";
import type { PPOConfig } from "./config.js";
import { MetricsLog, type MetricsRecord } from "./metrics-log.js";
import { AdamW } from "./optim.js";
import { PolicySet, type PolicySpecs } from "./policies.js";
import type { PPOProxyOptions } from "./proxy-options.js";
import { resumeFromCheckpoint, warnIgnoredKeys } from "./run-support.js";
import { type PolicyBundle, type ServeFn, type ServingHandle, servePolicy } from "./serving.js";
import { microBatchFitOptions, type StepModels } from "./step.js";
import { ValueHead } from "./value-head.js";

/**
 * Everything a PPO run sets up before its first step and tears down after its last: the models and
 * optimizers (restored from a checkpoint when resuming), the metrics log, the stop signal, the policy
 * server with the LLM proxy in front of it, and the resources published to the runners. The training
 * loops (sync-loop.ts, async-loop.ts) work on this.
 */

/** What `PPO.run` needs from its options here (see PPOOptions). */
export interface RunSetupOptions {
  config: PPOConfig;
  /** The raw config as given, for the warning about ignored VERL keys. */
  rawConfig: unknown;
  proxy?: PPOProxyOptions;
  proxyTokenSecret: string;
  policy: PolicyBundle;
  serve?: ServeFn;
  workers?: StepModels["workers"];
  modelName?: string;
  resourceName?: string;
  handleSignals?: boolean;
  /** The asynchronous loop runs: the server must serve snapshots and publish without a stop. */
  asyncLoop: boolean;
  /** Several trainable policies (policies.ts). */
  policies?: PolicySpecs;
}

export interface PPORun<T> {
  c: PPOConfig;
  context: AlgorithmContext<T>;
  adapter: Pick<Adapter<Span[], Triplet[]>, "adapt">;
  train: readonly T[];
  val: readonly T[];
  /** Prompts per step. */
  batchSize: number;
  stepsPerEpoch: number;
  totalSteps: number;
  models: StepModels;
  /** The policies of a multi-policy run (one adapter each), null otherwise. */
  policies: PolicySet | null;
  server: ServingHandle;
  proxy: LLMProxy;
  log: MetricsLog;
  /** Aborted by the context's signal or SIGINT/SIGTERM: the loops stop between (or during) collections. */
  stop: AbortController;
  /** The last completed step (restored from a checkpoint when resuming). */
  step: number;
  /** Metrics of the steps before a resume. */
  previous: MetricsRecord[];
  jsonlPath: string | null;
  plotPath: string;
  checkpointDir: string | null;
  /** Write a checkpoint of the current weights, optimizer state and `step`. */
  save(): Promise<void>;
  /** Stop the proxy and the server, free the models' extra state, remove the signal handlers. */
  close(): Promise<void>;
}

export async function setupRun<T>(context: AlgorithmContext<T>, o: RunSetupOptions): Promise<PPORun<T>> {
  const c = o.config;
  const { store, logger } = context;
  const { model } = o.policy;
  const root = resolve(c.trainer.default_local_dir);
  const modelName = o.modelName ?? defaultModelName(o.policy.model, "policy");
  const adapter: Pick<Adapter<Span[], Triplet[]>, "adapt"> = (context.adapter as
    | Adapter<Span[], Triplet[]>
    | undefined) ?? new ProxySpansToTriplets();
  const train = context.trainDataset;
  const batchSize = Math.min(c.data.train_batch_size, train.length);
  const stepsPerEpoch = Math.floor(train.length / Math.max(1, batchSize));
  const totalSteps = c.trainer.total_training_steps ?? stepsPerEpoch * c.trainer.total_epochs;

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
  const policies = o.policies ? new PolicySet(model, o.policies, c) : null;
  const valueHead =
    c.algorithm.adv_estimator === "gae"
      ? new ValueHead(model.config.dModel, c.critic.hidden_size, c.trainer.seed)
      : null;

  warnIgnoredKeys(o.rawConfig, logger);
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
    if (resumed && policies) await policies.restore(resumed.dir);
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
  if (o.handleSignals ?? true) {
    process.once("SIGINT", onSignal);
    process.once("SIGTERM", onSignal);
  }
  const removeHandlers = () => {
    context.signal.removeEventListener("abort", onContextAbort);
    process.removeListener("SIGINT", onSignal);
    process.removeListener("SIGTERM", onSignal);
  };

  const serve = o.serve ?? o.workers?.serve ?? servePolicy;
  const server = await serve(o.policy, {
    modelName,
    publication: o.asyncLoop ? "snapshot" : "swap",
    inFlight: c.actor_rollout_ref.rollout.partial_rollouts ? "resume" : "finish",
  });
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
    host: o.proxy?.host,
    port: o.proxy?.port,
    publicUrl: o.proxy?.publicUrl ?? null,
    model: modelName,
    ...(policies ? { policies: policies.proxyRoutes(modelName, server.servedModels?.()) } : {}),
    adminToken: randomBytes(24).toString("hex"),
    llmAuth: "token",
    tokenSecret: o.proxyTokenSecret,
    healthCheckIntervalMs: 0,
    logger: { warn: (m) => logger.info(`proxy: ${m}`), error: (m) => logger.error(`proxy: ${m}`) },
  });
  await proxy.start();
  logger.info(`PPO: LLM proxy on ${proxy.url}, published to agents as ${proxy.publicUrl}/v1`);
  // One LLM resource per policy (`planner_llm` asking for model "planner"), beside the main one.
  await publishResources(context, c, proxy, {
    [o.resourceName ?? "main_llm"]: modelName,
    ...policies?.resourceNames(),
  });

  const run: PPORun<T> = {
    c,
    context,
    adapter,
    train,
    val: context.valDataset ?? [],
    batchSize,
    stepsPerEpoch,
    totalSteps,
    models: {
      policy: model,
      reference,
      optimizer,
      valueHead,
      padId: o.policy.tokenizer.padId,
      workers: o.workers,
    },
    policies,
    server,
    proxy,
    log,
    stop,
    step,
    previous,
    jsonlPath,
    plotPath,
    checkpointDir: null,
    save: async () => {
      run.checkpointDir = await savePPOCheckpoint(root, {
        ...o.policy,
        optimizer: optimizer.getState(),
        reference,
        critic: valueHead?.getState() ?? null,
        state: { step: run.step, history: log.history, config: c },
        ...(policies ? { saveExtra: (dir: string) => policies.save(dir) } : {}),
      });
    },
    close: async () => {
      removeHandlers();
      await proxy.stop();
      await server.close();
      reference?.dispose();
      optimizer.dispose();
      policies?.dispose();
      valueHead?.optimizer.dispose();
    },
  };
  return run;
}

/** The ProxyLLM resources the runners read: "ppo-train" (rollout sampling) and "ppo-val" (val_kwargs). */
async function publishResources<T>(
  context: AlgorithmContext<T>,
  c: PPOConfig,
  proxy: LLMProxy,
  /** Resource name → the model name its ProxyLLM asks for. */
  llms: Record<string, string>,
): Promise<void> {
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
  const resources = (k: Parameters<typeof sampling>[0]) =>
    Object.fromEntries(
      Object.entries(llms).map(([name, m]) => [
        name,
        proxy.asResource({ model: m, samplingParameters: sampling(k) }),
      ]),
    );
  await context.store.updateResources("ppo-train", { ...extra, ...resources(rollout) });
  await context.store.updateResources("ppo-val", { ...extra, ...resources(rollout.val_kwargs) });
}
