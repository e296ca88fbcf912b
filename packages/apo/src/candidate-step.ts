import type {
  AttemptedRollout,
  LightningTracer,
  Logger,
  NamedResources,
  PromptTemplate,
  RolloutTrace,
} from "@agl/core";
import { promptTemplate } from "@agl/core";
import { type RandomSource, sample } from "./beam.js";
import type { EditInstruction, Experiment, GradientInstruction } from "./instructions.js";
import type { Journal, RejectedRecord } from "./journal.js";
import type { OptimizerClient } from "./optimizer-client.js";
import type { ProblemCounter } from "./problems.js";
import type { Stopwatch } from "./stopwatch.js";
import { checkCandidate, extractPrompt } from "./template-check.js";

/** A member of the beam (or a candidate) during the run. */
export interface BeamEntry {
  version: string;
  resourcesId: string;
  template: PromptTemplate;
  /** Its score on the latest batch it was compared on; null before that. */
  score: number | null;
}

/** What every step of a run shares. */
export interface StepEnvironment {
  journal: Journal;
  optimizer: OptimizerClient;
  tracer: LightningTracer;
  logger: Logger;
  problems: ProblemCounter;
  stopwatch: Stopwatch;
  random: RandomSource;
  gradientModel: string;
  applyEditModel: string;
  gradientBatchSize: number;
  maxExperimentChars: number;
  maxPromptChars: number;
  requiredVariables: readonly string[];
  resourceName: string;
  /** The resources of every version, the prompt aside. */
  baseResources: NamedResources;
  /** Templates already in the run (a candidate equal to one is a duplicate). */
  templates: Set<string>;
  /** Hands out the next version name. */
  nextVersion(): string;
  signal: AbortSignal;
}

export interface StepPlan {
  parent: BeamEntry;
  round: number;
  branch: number;
  experiments: Experiment[];
  gradient: GradientInstruction;
  edit: EditInstruction;
}

/**
 * One optimisation step: critique the parent from its training experiments, ask for an edit, check the
 * result and, if it is usable, publish it as a new version. The step is a rollout of its own whose attempt
 * records both model calls. Returns the new version, or null when the step produced none (logged,
 * counted and recorded with its reason).
 */
export async function runCandidateStep(env: StepEnvironment, plan: StepPlan): Promise<BeamEntry | null> {
  const record = await env.journal.startStep({
    parent: plan.parent.version,
    round: plan.round,
    branch: plan.branch,
  });
  const trace = env.tracer.traceAttempt({
    rolloutId: record.rollout_id,
    attemptId: record.attempt.attempt_id,
    store: env.journal.store,
  });
  try {
    return await optimise(env, plan, record, trace);
  } catch (error) {
    // Stopped (or the store failed) mid-step: close the step's attempt rather than leave it running.
    await trace.flush().catch(() => {});
    const message = error instanceof Error ? error.message : String(error);
    await env.journal.store
      .updateAttempt(record.rollout_id, record.attempt.attempt_id, {
        status: "failed",
        metadata: { error: { message: `step interrupted: ${message}` } },
      })
      .catch(() => {});
    throw error;
  }
}

async function optimise(
  env: StepEnvironment,
  plan: StepPlan,
  record: AttemptedRollout,
  trace: RolloutTrace,
): Promise<BeamEntry | null> {
  const { journal } = env;
  const { parent } = plan;
  const where = `round ${plan.round} ${parent.version} branch ${plan.branch}`;
  const reject = async (reason: RejectedRecord["reason"], detail: string, count: boolean) => {
    if (count) env.problems.add(reason);
    env.logger.warn(`apo: ${where}: no candidate (${reason}: ${detail})`);
    await trace.flush();
    await journal.finishStep(record, {
      parent: parent.version,
      round: plan.round,
      branch: plan.branch,
      reason,
      detail,
    });
    return null;
  };

  const experiments = sample(plan.experiments, env.gradientBatchSize, env.random);
  const critique = await trace.run(() =>
    env.stopwatch.wait(() =>
      env.optimizer.complete(
        "gradient",
        env.gradientModel,
        plan.gradient.messages({
          template: parent.template.template,
          experiments,
          maxExperimentChars: env.maxExperimentChars,
        }),
        env.signal,
      ),
    ),
  );
  // Failed calls were counted by the client already.
  if (!critique.ok) return reject(critique.problem, critique.message, false);
  const critiqueText = critique.text?.trim() ?? "";
  if (critiqueText === "") return reject("no_critique", "the critique model returned no text", true);

  const edited = await trace.run(() =>
    env.stopwatch.wait(() =>
      env.optimizer.complete(
        "edit",
        env.applyEditModel,
        plan.edit.messages({
          template: parent.template.template,
          critique: critiqueText,
          variables: env.requiredVariables,
        }),
        env.signal,
      ),
    ),
  );
  if (!edited.ok) return reject(edited.problem, edited.message, false);
  const verdict = checkCandidate(extractPrompt(edited.text), {
    requiredVariables: env.requiredVariables,
    engine: parent.template.engine,
    maxPromptChars: env.maxPromptChars,
    existing: env.templates,
  });
  if (!verdict.ok) return reject(verdict.reason, verdict.detail, true);

  // Claim the template and the version name before any await, so parallel steps cannot both take them.
  env.templates.add(verdict.template);
  const version = env.nextVersion();
  const template = promptTemplate(verdict.template, parent.template.engine);
  const resourcesId = journal.resourcesIdOf(version);
  await journal.store.updateResources(resourcesId, { ...env.baseResources, [env.resourceName]: template });
  await trace.flush();
  await journal.finishStep(record, {
    version,
    resources_id: resourcesId,
    parent: parent.version,
    round: plan.round,
    branch: plan.branch,
    gradient_instruction: plan.gradient.name,
    edit_instruction: plan.edit.name,
    critique: critiqueText.slice(0, 8000),
    scores: [],
  });
  env.logger.info(`apo: ${where}: new version ${version} (${plan.gradient.name} → ${plan.edit.name})`);
  return { version, resourcesId, template, score: null };
}
