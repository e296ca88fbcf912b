import { InvalidArgumentError, type Logger, type NamedResources, type PromptTemplate } from "@agl/core";
import type { BeamEntry } from "./candidate-step.js";
import { type Journal, type PromptHistory, versionNumber } from "./journal.js";

export interface RunState {
  /** Every version of the run by name. */
  entries: Map<string, BeamEntry>;
  beam: BeamEntry[];
  /** The number of the next version. */
  versionCounter: number;
  completedRounds: number;
  initialScore: number | null;
  best: { version: string; score: number; template: PromptTemplate } | undefined;
  /** The stored run this continues, if any. */
  stored: PromptHistory | null;
}

/**
 * Where a run starts: the state of the stored run under the journal's id (checked to optimise the same
 * seed), or, for a new run, the seed published as `v0` with the run's records created.
 */
export async function openRun(
  journal: Journal,
  options: {
    seed: PromptTemplate;
    resourceName: string;
    baseResources: NamedResources;
    resume: boolean;
    logger: Logger;
  },
): Promise<RunState> {
  const { seed, resourceName } = options;
  const stored = await journal.load();
  if (stored) {
    if (!options.resume) {
      throw new InvalidArgumentError(
        "apo.runId",
        `the store already has an APO run "${journal.runId}"; resume it or pick another runId`,
      );
    }
    const v0 = stored.versions.find((v) => v.version === "v0");
    if (stored.resourceName !== resourceName || !v0 || v0.template.template !== seed.template) {
      throw new InvalidArgumentError(
        "apo.runId",
        `run "${stored.runId}" in the store optimises another prompt (resource "${stored.resourceName}"); use another runId`,
      );
    }
    const entries = new Map<string, BeamEntry>();
    let versionCounter = 0;
    for (const v of stored.versions) {
      entries.set(v.version, {
        version: v.version,
        resourcesId: v.resourcesId,
        template: v.template,
        score: v.score,
      });
      versionCounter = Math.max(versionCounter, versionNumber(v.version) + 1);
    }
    const bestEntry = stored.best ? entries.get(stored.best.version) : undefined;
    options.logger.info(
      `apo: resuming run "${journal.runId}" after round ${stored.completedRounds} (${entries.size} versions)`,
    );
    return {
      entries,
      beam: stored.beam.map((v) => entries.get(v)).filter((e): e is BeamEntry => e !== undefined),
      versionCounter,
      completedRounds: stored.completedRounds,
      initialScore: v0.scores.find((s) => s.round === 0)?.score ?? null,
      best: bestEntry && stored.best ? { ...stored.best, template: bestEntry.template } : undefined,
      stored,
    };
  }
  const v0: BeamEntry = {
    version: "v0",
    resourcesId: journal.resourcesIdOf("v0"),
    template: seed,
    score: null,
  };
  await journal.store.updateResources(v0.resourcesId, { ...options.baseResources, [resourceName]: seed });
  await journal.createRun({
    resource_name: resourceName,
    completed_rounds: 0,
    beam: ["v0"],
    best: null,
    problems: {},
  });
  await journal.recordSeed({
    version: "v0",
    resources_id: v0.resourcesId,
    parent: null,
    round: 0,
    branch: null,
    gradient_instruction: null,
    edit_instruction: null,
    critique: null,
    scores: [],
  });
  return {
    entries: new Map([["v0", v0]]),
    beam: [v0],
    versionCounter: 1,
    completedRounds: 0,
    initialScore: null,
    best: undefined,
    stored: null,
  };
}
