import { z } from "zod";
import { findFinalReward } from "../emitters/reward-reader.js";
import { AbortedError } from "../errors.js";
import { parseOptions } from "../options.js";
import { isTerminalRolloutStatus } from "../store/state-machine.js";
import type { Rollout, RolloutConfigInput, RolloutMode, RolloutStatus } from "../types/rollout.js";
import { RolloutConfigSchema } from "../types/rollout.js";
import type { Span } from "../types/span.js";
import type { Algorithm, AlgorithmContext } from "./algorithm.js";

export const BaselineOptionsSchema = z.object({
  nEpochs: z.number().int().min(1).default(1),
  /** Enqueue more only while at most this many of our rollouts are queuing or requeuing. */
  maxQueueLength: z.number().int().min(1).default(4),
  /** Longest wait per check while rollouts run (wake-ups come from completions, this bounds them). */
  pollIntervalMs: z.number().min(1).default(1000),
  /** Resources id the initial resources are published under. */
  resourcesId: z.string().min(1).default("default"),
  /** Config applied to every enqueued rollout (timeouts, retries). */
  rolloutConfig: RolloutConfigSchema.partial().optional(),
});
export type BaselineOptions = z.input<typeof BaselineOptionsSchema>;

export interface BaselineRolloutReport {
  rolloutId: string;
  input: unknown;
  mode: RolloutMode | null;
  epoch: number;
  status: RolloutStatus;
  /** Final reward of the latest attempt (last reward span), null when none was emitted. */
  reward: number | null;
  attempts: number;
  spanCount: number;
  /** The adapter's output for the latest attempt's spans, when an adapter was given. */
  adapted?: unknown;
  /** The error the latest failed attempt recorded. */
  error?: string;
}

export interface BaselineSummary {
  rollouts: BaselineRolloutReport[];
  succeeded: number;
  failed: number;
  cancelled: number;
  /** Rollouts not terminal when the run ended (the trainer was stopped): still queued or running. */
  unfinished: number;
  /** Rollouts per final status; sums to `rollouts.length`. */
  byStatus: Partial<Record<RolloutStatus, number>>;
  /** Mean of the non-null rewards, null when there are none. */
  meanReward: number | null;
}

/**
 * Runs every task once per epoch (train items, then val items), with a bounded queue, waits for each
 * rollout to finish and reports its status and reward (Agent Lightning's Baseline). Learns nothing: it
 * is the smoke test for an agent and what `trainer.dev()` runs.
 */
export class Baseline implements Algorithm<unknown, BaselineSummary> {
  readonly name = "Baseline";
  readonly fast = true;
  private readonly opts: z.output<typeof BaselineOptionsSchema>;

  constructor(options: BaselineOptions = {}) {
    this.opts = parseOptions(BaselineOptionsSchema, options, "baseline");
  }

  async run(ctx: AlgorithmContext): Promise<BaselineSummary> {
    const { store, signal, logger } = ctx;
    const resources = await store.updateResources(this.opts.resourcesId, ctx.initialResources ?? {});
    const items: Array<{ input: unknown; mode: RolloutMode; epoch: number }> = [];
    for (let epoch = 0; epoch < this.opts.nEpochs; epoch++) {
      for (const input of ctx.trainDataset) items.push({ input, mode: "train", epoch });
      for (const input of ctx.valDataset ?? []) items.push({ input, mode: "val", epoch });
    }
    const config: RolloutConfigInput | undefined = this.opts.rolloutConfig as RolloutConfigInput | undefined;
    const enqueued: Array<{ rolloutId: string; input: unknown; mode: RolloutMode; epoch: number }> = [];
    const open = new Set<string>();
    for (const item of items) {
      while (!signal.aborted && (await this.queued(ctx, open)) >= this.opts.maxQueueLength) {
        await this.waitSome(ctx, open);
      }
      if (signal.aborted) break;
      const rollout = await store.enqueueRollout({
        input: item.input,
        mode: item.mode,
        resources_id: resources.resources_id,
        ...(config ? { config: RolloutConfigSchema.parse(config) } : {}),
      });
      enqueued.push({ rolloutId: rollout.rollout_id, ...item });
      open.add(rollout.rollout_id);
    }
    while (!signal.aborted && open.size > 0) await this.waitSome(ctx, open);

    const reports: BaselineRolloutReport[] = [];
    for (const entry of enqueued) {
      const report = await this.report(ctx, entry);
      reports.push(report);
      logger.info(
        `rollout ${report.rolloutId} (${report.mode}) ${report.status}: reward=${report.reward ?? "none"} spans=${report.spanCount} attempts=${report.attempts}`,
      );
    }
    const rewards = reports.map((r) => r.reward).filter((r): r is number => r !== null);
    const byStatus: Partial<Record<RolloutStatus, number>> = {};
    for (const r of reports) byStatus[r.status] = (byStatus[r.status] ?? 0) + 1;
    return {
      rollouts: reports,
      succeeded: byStatus.succeeded ?? 0,
      failed: byStatus.failed ?? 0,
      cancelled: byStatus.cancelled ?? 0,
      unfinished: reports.filter((r) => !isTerminalRolloutStatus(r.status)).length,
      byStatus,
      meanReward: rewards.length > 0 ? rewards.reduce((a, b) => a + b, 0) / rewards.length : null,
    };
  }

  /** How many of our unfinished rollouts are still waiting in the queue. */
  private async queued(ctx: AlgorithmContext, open: Set<string>): Promise<number> {
    if (open.size === 0) return 0;
    const page = await ctx.store.queryRollouts({
      statusIn: ["queuing", "requeuing"],
      rolloutIdIn: [...open],
      limit: 1,
    });
    return page.total;
  }

  /** Wait until some open rollout finishes (or the poll interval passes); drop finished ones from `open`. */
  private async waitSome(ctx: AlgorithmContext, open: Set<string>): Promise<void> {
    let done: Rollout[];
    try {
      done = await ctx.store.waitForRollouts([...open], {
        timeoutSeconds: this.opts.pollIntervalMs / 1000,
        signal: ctx.signal,
      });
    } catch (error) {
      // stopping: the caller sees the abort on its next check of ctx.signal
      if (AbortedError.isInstance(error)) return;
      throw error;
    }
    for (const rollout of done) open.delete(rollout.rollout_id);
  }

  private async report(
    ctx: AlgorithmContext,
    entry: { rolloutId: string; input: unknown; mode: RolloutMode; epoch: number },
  ): Promise<BaselineRolloutReport> {
    const { store } = ctx;
    const rollout = await store.getRolloutById(entry.rolloutId);
    const attempts = await store.queryAttempts(entry.rolloutId);
    const spans: Span[] = (await store.querySpans(entry.rolloutId, { attemptId: "latest" })).items;
    const latest = attempts.items.at(-1);
    const error = latest?.metadata?.error as { message?: string } | undefined;
    const report: BaselineRolloutReport = {
      rolloutId: entry.rolloutId,
      input: entry.input,
      mode: entry.mode,
      epoch: entry.epoch,
      status: rollout?.status ?? "failed",
      reward: findFinalReward(spans),
      attempts: attempts.total,
      spanCount: spans.length,
      ...(error?.message ? { error: error.message } : {}),
    };
    if (ctx.adapter) {
      try {
        report.adapted = ctx.adapter.adapt(spans);
      } catch (adaptError) {
        ctx.logger.warn(`adapter failed on rollout ${entry.rolloutId}`, adaptError);
      }
    }
    return report;
  }
}
