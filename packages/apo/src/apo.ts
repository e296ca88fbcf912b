import { TraceToMessages } from "@agl/adapter";
import {
  AbortedError,
  type Algorithm,
  type AlgorithmContext,
  InvalidArgumentError,
  LightningTracer,
  type NamedResources,
  type PromptTemplate,
  parseOptions,
  RolloutConfigSchema,
  type Span,
} from "@agl/core";
import { batches, type RandomSource, sampleParents, selectBeam } from "./beam.js";
import { type BeamEntry, runCandidateStep, type StepEnvironment, type StepPlan } from "./candidate-step.js";
import { type EvaluationJob, type EvaluationSettings, evaluateBatch } from "./evaluation.js";
import { DEFAULT_EDIT_INSTRUCTIONS, DEFAULT_GRADIENT_INSTRUCTIONS } from "./instructions.js";
import { Journal, type ScoreEntry } from "./journal.js";
import { OptimizerClient } from "./optimizer-client.js";
import { type ApoOptions, ApoOptionsSchema, type ResolvedApoOptions } from "./options.js";
import { mapPool } from "./pool.js";
import { addCounts, ProblemCounter, type ProblemCounts } from "./problems.js";
import { type ApoRoundReport, logRound } from "./round-report.js";
import { openRun } from "./run-state.js";
import { Stopwatch } from "./stopwatch.js";
import { templateVariables } from "./template-check.js";

export interface ApoResult {
  runId: string;
  best: { version: string; score: number; template: PromptTemplate };
  /** The seed's full validation score (null without initial validation). */
  initialScore: number | null;
  rounds: ApoRoundReport[];
  /** Rounds done before this call (when it resumed a run). */
  resumedAfterRound: number;
  problems: ProblemCounts;
  optimizerCalls: number;
  rollouts: number;
  /** True when the Trainer was stopped before the last round ended. */
  stopped: boolean;
}

/**
 * Automatic prompt optimisation: beam search over prompt templates with textual gradients (the ideas of
 * ProTeGi and TextGrad, as in Agent Lightning's APO). Each round samples parents from the beam; for every
 * parent, `branchFactor` times, runs a training batch with it, has a critique model explain what went
 * wrong from the conversations and rewards, and an edit model rewrite the template accordingly. All new
 * candidates and the beam are scored on a validation batch, the best `beamWidth` stay, and the leader is
 * re-scored on the full validation set to track the best prompt ever seen.
 *
 * The agent reads the template through `context.promptTemplate` (or `context.resources[name]`). Versions,
 * scores and the optimiser's traced calls are kept in the store: see `loadPromptHistory`/`bestPrompt`.
 */
export type { ApoRoundReport };

export class APO<T = unknown> implements Algorithm<T, ApoResult> {
  readonly name = "APO";
  private readonly opts: ResolvedApoOptions;
  private best: { version: string; score: number; template: PromptTemplate } | undefined;

  constructor(options: ApoOptions = {}) {
    this.opts = parseOptions(ApoOptionsSchema, options, "apo");
  }

  /** The best prompt of the last run (highest full validation score; the seed until one is measured). */
  bestPrompt(): PromptTemplate {
    if (!this.best) throw new InvalidArgumentError("apo", "no run yet: bestPrompt() is known after run()");
    return this.best.template;
  }

  async run(ctx: AlgorithmContext<T>): Promise<ApoResult> {
    const o = this.opts;
    const { store, logger, signal } = ctx;
    this.best = undefined;
    const random: RandomSource = o.random ?? Math.random;
    const { resourceName, seed } = this.seedPrompt(ctx.initialResources);
    const requiredVariables = templateVariables(seed.template, seed.engine);
    if (requiredVariables === null && seed.engine === "f-string") {
      throw new InvalidArgumentError(
        `initialResources.${resourceName}.template`,
        "is not a valid f-string template (write literal braces as {{ and }})",
      );
    }
    if (ctx.trainDataset.length === 0)
      throw new InvalidArgumentError("trainDataset", "APO needs training tasks");
    const valDataset = ctx.valDataset ?? [];
    if (valDataset.length === 0) throw new InvalidArgumentError("valDataset", "APO needs validation tasks");

    const baseResources: NamedResources = { ...ctx.initialResources };
    delete baseResources[resourceName];
    const problems = new ProblemCounter();
    const stopwatch = new Stopwatch();
    const tracer = new LightningTracer({ name: "agl-apo", logger });
    const optimizer = new OptimizerClient({
      ...(o.client ? { client: o.client } : {}),
      ...(o.baseURL ? { baseURL: o.baseURL } : {}),
      ...(o.apiKey ? { apiKey: o.apiKey } : {}),
      timeoutMs: o.callTimeoutMs,
      maxRetries: o.maxRetries,
      temperature: o.diversityTemperature,
      tracer,
      logger,
      problems,
    });
    const journal = new Journal(store, o.runId);
    const adapter = isMessagesAdapter(ctx.adapter) ? ctx.adapter : new TraceToMessages();
    const rolloutConfig = o.rolloutConfig ? RolloutConfigSchema.parse(o.rolloutConfig) : undefined;
    const evalSettings = (purpose: EvaluationSettings["purpose"], round: number): EvaluationSettings => ({
      store,
      runId: o.runId,
      mode: purpose === "train_batch" ? "train" : "val",
      purpose,
      round,
      timeoutSeconds: o.rolloutBatchTimeoutSeconds,
      pollIntervalMs: o.pollIntervalMs,
      rolloutConfig,
      ...(purpose === "train_batch" ? { toMessages: (spans: Span[]) => adapter.adapt(spans) } : {}),
      signal,
      logger,
      problems,
      stopwatch,
    });

    // --- the beam to start from: a stored run under this id, else the seed
    const state = await openRun(journal, { seed, resourceName, baseResources, resume: o.resume, logger });
    const { entries, stored } = state;
    let { beam, versionCounter, initialScore } = state;
    const { completedRounds } = state;
    if (state.best) this.best = state.best;
    // The run record keeps the counts of every session of a resumed run.
    const runProblems = () => addCounts(stored?.problems ?? {}, problems.snapshot());
    this.best ??= { version: beam[0]!.version, score: Number.NEGATIVE_INFINITY, template: beam[0]!.template };

    const rounds: ApoRoundReport[] = [];
    let rollouts = 0;
    const record = async (entry: BeamEntry, score: ScoreEntry) => {
      entry.score = score.score;
      await journal.addScore(entry.version, score);
    };
    const env: StepEnvironment = {
      journal,
      optimizer,
      tracer,
      logger,
      problems,
      stopwatch,
      random,
      gradientModel: o.gradientModel,
      applyEditModel: o.applyEditModel,
      gradientBatchSize: o.gradientBatchSize,
      maxExperimentChars: o.maxExperimentChars,
      maxPromptChars: o.maxPromptChars ?? Math.max(4000, 10 * seed.template.length),
      requiredVariables: requiredVariables ?? [],
      resourceName,
      baseResources,
      templates: new Set([...entries.values()].map((e) => e.template.template)),
      nextVersion: () => `v${versionCounter++}`,
      signal,
    };
    const gradientInstructions = o.gradientInstructions ?? DEFAULT_GRADIENT_INSTRUCTIONS;
    const editInstructions = o.editInstructions ?? DEFAULT_EDIT_INSTRUCTIONS;
    const pick = <I>(list: readonly I[]) => list[Math.floor(random() * list.length)]!;
    const trainBatches = batches(ctx.trainDataset, o.gradientBatchSize, random);
    const valBatches = batches(valDataset, o.valBatchSize, random);
    let stopped = false;

    try {
      // A resumed run that stopped before its seed was scored scores it now.
      const seedScored = stored?.versions[0]?.scores.some((s) => s.round === 0) ?? false;
      if (o.runInitialValidation && completedRounds === 0 && !seedScored) {
        const [seedResult] = await evaluateBatch(
          [{ version: "v0", resourcesId: beam[0]!.resourcesId, tasks: valDataset }],
          evalSettings("val_full", 0),
        );
        rollouts += valDataset.length;
        initialScore = seedResult!.score;
        await record(beam[0]!, {
          round: 0,
          split: "val_full",
          score: initialScore,
          rollouts: valDataset.length,
        });
        this.best = { version: "v0", score: initialScore, template: seed };
        await journal.updateRun({
          best: { version: "v0", score: initialScore },
          problems: runProblems(),
        });
        logger.info(
          `apo: seed v0 scores ${initialScore.toFixed(3)} on ${valDataset.length} validation tasks`,
        );
      }

      for (let round = completedRounds + 1; round <= o.beamRounds; round++) {
        const started = performance.now();
        const waitedBefore = stopwatch.waitedMs();
        const callsBefore = optimizer.calls;
        const problemsBefore = problems.snapshot();
        const rolloutsBefore = rollouts;
        const parents = sampleParents(beam, o.beamWidth, random);

        // 1. every parent x branch runs its own training batch; all of them at once
        const plans: Array<Omit<StepPlan, "experiments"> & { tasks: T[] }> = [];
        for (const parent of parents) {
          for (let branch = 1; branch <= o.branchFactor; branch++) {
            plans.push({
              parent,
              round,
              branch,
              tasks: trainBatches.next().value as T[],
              gradient: pick(gradientInstructions),
              edit: pick(editInstructions),
            });
          }
        }
        const trainJobs: EvaluationJob<T>[] = plans.map((p) => ({
          version: p.parent.version,
          resourcesId: p.parent.resourcesId,
          tasks: p.tasks,
        }));
        const trainResults = await evaluateBatch(trainJobs, evalSettings("train_batch", round));
        rollouts += trainJobs.reduce((n, j) => n + j.tasks.length, 0);

        // 2. critique + edit, a few steps at a time
        const created = await mapPool(plans, o.parallelSteps, (plan, i) =>
          runCandidateStep(env, { ...plan, experiments: trainResults[i]!.experiments }),
        );
        const candidates = created.filter((c): c is BeamEntry => c !== null);
        for (const c of candidates) entries.set(c.version, c);

        // 3. the beam and the candidates on one validation batch; keep the best beamWidth
        const pool = [...beam, ...candidates];
        const valBatch = valBatches.next().value as T[];
        const valResults = await evaluateBatch(
          pool.map((e) => ({ version: e.version, resourcesId: e.resourcesId, tasks: valBatch })),
          evalSettings("val_batch", round),
        );
        rollouts += pool.length * valBatch.length;
        for (const [i, entry] of pool.entries()) {
          await record(entry, {
            round,
            split: "val_batch",
            score: valResults[i]!.score,
            rollouts: valBatch.length,
          });
        }
        beam = selectBeam(pool as Array<BeamEntry & { score: number }>, o.beamWidth);

        // 4. the leader on the whole validation set
        const leader = beam[0]!;
        const [full] = await evaluateBatch(
          [{ version: leader.version, resourcesId: leader.resourcesId, tasks: valDataset }],
          evalSettings("val_full", round),
        );
        rollouts += valDataset.length;
        const leaderScore = full!.score;
        await journal.addScore(leader.version, {
          round,
          split: "val_full",
          score: leaderScore,
          rollouts: valDataset.length,
        });
        if (leaderScore > this.best.score) {
          logger.info(
            `apo: round ${round}: new best ${leader.version} ${leaderScore.toFixed(3)} (was ${this.best.version} ${this.best.score.toFixed(3)})`,
          );
          this.best = { version: leader.version, score: leaderScore, template: leader.template };
        }
        await journal.updateRun({
          completed_rounds: round,
          beam: beam.map((e) => e.version),
          best: { version: this.best.version, score: this.best.score },
          problems: runProblems(),
        });

        const wallMs = performance.now() - started;
        const waitedMs = stopwatch.waitedMs() - waitedBefore;
        const report: ApoRoundReport = {
          round,
          parents: parents.map((p) => p.version),
          candidates: candidates.map((c) => c.version),
          beam: beam.map((e) => ({ version: e.version, score: e.score ?? 0 })),
          leader: { version: leader.version, score: leaderScore },
          optimizerCalls: optimizer.calls - callsBefore,
          rollouts: rollouts - rolloutsBefore,
          problems: problems.since(problemsBefore),
          wallMs,
          waitedMs,
          overheadMs: Math.max(0, wallMs - waitedMs),
        };
        rounds.push(report);
        logRound(logger, report);
      }
    } catch (error) {
      if (!(AbortedError.isInstance(error) || signal.aborted)) throw error;
      stopped = true;
      logger.warn(`apo: stopped during the run; best so far ${this.best.version}`);
    } finally {
      // Every step flushed its spans; this releases the tracer's provider.
      await tracer.shutdown();
    }

    const best =
      this.best.score === Number.NEGATIVE_INFINITY ? { ...this.best, score: Number.NaN } : this.best;
    return {
      runId: o.runId,
      best,
      initialScore,
      rounds,
      resumedAfterRound: completedRounds,
      problems: problems.snapshot(),
      optimizerCalls: optimizer.calls,
      rollouts,
      stopped,
    };
  }

  private seedPrompt(resources: NamedResources | undefined): { resourceName: string; seed: PromptTemplate } {
    const entries = Object.entries(resources ?? {});
    const wanted = this.opts.promptResourceName;
    const found = wanted
      ? entries.find(([name]) => name === wanted)
      : entries.find(([, r]) => r.resource_type === "prompt_template");
    if (found?.[1].resource_type !== "prompt_template") {
      throw new InvalidArgumentError(
        wanted ? `initialResources.${wanted}` : "initialResources",
        wanted
          ? "must be a prompt_template resource"
          : "APO needs a prompt_template resource to optimise (the seed prompt)",
      );
    }
    return { resourceName: found[0], seed: found[1] };
  }
}

/** The Trainer's adapter when it turns spans into messages (e.g. a configured TraceToMessages). */
function isMessagesAdapter(adapter: unknown): adapter is TraceToMessages {
  return (
    adapter instanceof TraceToMessages ||
    (adapter as { name?: unknown } | undefined)?.name === "TraceToMessages"
  );
}
