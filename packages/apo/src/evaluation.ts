import type { MessagesExample } from "@agl/adapter";
import {
  findFinalReward,
  isTerminalRolloutStatus,
  type LightningStore,
  type Logger,
  type RolloutConfig,
  type RolloutMode,
  type Span,
} from "@agl/core";
import { meanReward } from "./beam.js";
import type { Experiment } from "./instructions.js";
import { APO_METADATA_KEY } from "./journal.js";
import { mapPool } from "./pool.js";
import type { ProblemCounter } from "./problems.js";
import type { Stopwatch } from "./stopwatch.js";

/** One prompt version to run on a batch of tasks. */
export interface EvaluationJob<T> {
  version: string;
  resourcesId: string;
  tasks: readonly T[];
}

export interface EvaluationSettings {
  store: LightningStore;
  runId: string;
  mode: RolloutMode;
  /** What the rollouts are for, stored in their metadata. */
  purpose: "train_batch" | "val_batch" | "val_full";
  round: number;
  timeoutSeconds: number;
  pollIntervalMs: number;
  rolloutConfig: RolloutConfig | undefined;
  /** Turn spans into conversations (only needed for the critique's training batches). */
  toMessages?: (spans: Span[]) => MessagesExample[];
  signal: AbortSignal;
  logger: Logger;
  problems: ProblemCounter;
  stopwatch: Stopwatch;
}

export interface EvaluationResult {
  version: string;
  /** Mean final reward over the batch; unrewarded and unfinished rollouts count as 0. */
  score: number;
  experiments: Experiment[];
  rolloutIds: string[];
}

/**
 * Run every job's tasks with its version's resources, all enqueued at once so the runners work on them
 * together, wait for them up to the batch timeout (stragglers are cancelled and score 0), and score each
 * version by the mean final reward of its rollouts.
 */
export async function evaluateBatch<T>(
  jobs: readonly EvaluationJob<T>[],
  settings: EvaluationSettings,
): Promise<EvaluationResult[]> {
  const { store } = settings;
  const requests = jobs.flatMap((job) =>
    job.tasks.map((input) => ({
      input,
      mode: settings.mode,
      resources_id: job.resourcesId,
      ...(settings.rolloutConfig ? { config: settings.rolloutConfig } : {}),
      metadata: {
        [APO_METADATA_KEY]: {
          kind: "evaluation",
          run_id: settings.runId,
          version: job.version,
          purpose: settings.purpose,
          round: settings.round,
        },
      },
    })),
  );
  if (requests.length === 0)
    return jobs.map((j) => ({ version: j.version, score: 0, experiments: [], rolloutIds: [] }));
  const rollouts = await store.enqueueManyRollouts(requests);
  const ids = rollouts.map((r) => r.rollout_id);
  const finished = await settings.stopwatch.wait(() => waitAll(ids, settings));
  const unfinished = ids.filter((id) => !finished.has(id));
  if (unfinished.length > 0) {
    settings.problems.add("rollout_timeout", unfinished.length);
    settings.logger.warn(
      `apo: ${unfinished.length} of ${ids.length} ${settings.purpose} rollouts unfinished after ${settings.timeoutSeconds}s; cancelled, scored 0`,
    );
    await Promise.all(
      unfinished.map((id) =>
        store.updateRollout(id, { status: "cancelled" }).catch((error: unknown) => {
          settings.logger.debug(`apo: could not cancel rollout ${id}`, error);
        }),
      ),
    );
  }
  // Read every rollout's spans, a few at a time (a remote store answers each over HTTP).
  const experiments = await mapPool(ids, 16, async (id): Promise<Experiment> => {
    const status = finished.get(id);
    if (status === undefined) return { status: "timeout", reward: null, conversations: [] };
    if (status !== "succeeded") settings.problems.add("rollout_failed");
    const spans = (await store.querySpans(id, { attemptId: "latest" })).items;
    return {
      status,
      reward: findFinalReward(spans),
      conversations: settings.toMessages ? safeMessages(settings, spans, id) : [],
    };
  });
  const results: EvaluationResult[] = [];
  let offset = 0;
  for (const job of jobs) {
    const jobExperiments = experiments.slice(offset, offset + job.tasks.length);
    results.push({
      version: job.version,
      score: meanReward(
        jobExperiments.map((e) => e.reward),
        job.tasks.length,
      ),
      experiments: jobExperiments,
      rolloutIds: ids.slice(offset, offset + job.tasks.length),
    });
    offset += job.tasks.length;
  }
  return results;
}

function safeMessages(settings: EvaluationSettings, spans: Span[], rolloutId: string): MessagesExample[] {
  try {
    return settings.toMessages!(spans);
  } catch (error) {
    settings.logger.warn(`apo: could not read the conversation of rollout ${rolloutId}`, error);
    return [];
  }
}

/** Ids → final status of those terminal by the deadline. */
async function waitAll(ids: string[], settings: EvaluationSettings): Promise<Map<string, string>> {
  const deadline = Date.now() + settings.timeoutSeconds * 1000;
  const done = new Map<string, string>();
  for (;;) {
    const open = ids.filter((id) => !done.has(id));
    if (open.length === 0) break;
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    const finished = await settings.store.waitForRollouts(open, {
      timeoutSeconds: Math.min(remaining, settings.pollIntervalMs) / 1000,
      signal: settings.signal,
    });
    for (const r of finished) if (isTerminalRolloutStatus(r.status)) done.set(r.rollout_id, r.status);
  }
  return done;
}
