/**
 * APO keeps its history in the store, next to the rollouts it drives, so a run can be resumed and
 * inspected from any process that opens the same store:
 *
 * - every prompt version is a resources version (`<runId>-v<n>`): the Trainer's initial resources with
 *   the prompt template replaced;
 * - every optimisation step is a rollout with no queue entry: its attempt holds the traced calls to the
 *   critique and edit models, its `metadata.agl_apo` says which version came out (or why none did), the
 *   critique, and the version's scores as they are measured;
 * - one more rollout, `kind: "run"`, holds the completed rounds, the beam and the best version.
 */
import type { AttemptedRollout, LightningStore, PromptTemplate, Rollout } from "@agl/core";
import type { ProblemCounts } from "./problems.js";
import type { CandidateRejection } from "./template-check.js";

/** The metadata key of APO's records on rollouts. */
export const APO_METADATA_KEY = "agl_apo";

export type ScoreSplit = "val_batch" | "val_full";

export interface ScoreEntry {
  /** 0 for the initial validation. */
  round: number;
  split: ScoreSplit;
  score: number;
  rollouts: number;
}

export interface VersionRecord {
  kind: "version";
  run_id: string;
  version: string;
  resources_id: string;
  parent: string | null;
  round: number;
  branch: number | null;
  gradient_instruction: string | null;
  edit_instruction: string | null;
  critique: string | null;
  scores: ScoreEntry[];
}

export interface RejectedRecord {
  kind: "rejected";
  run_id: string;
  parent: string;
  round: number;
  branch: number;
  reason: CandidateRejection | "rate_limit_exhausted" | "timeout" | "api_error" | "no_critique";
  detail: string;
}

export interface RunRecord {
  kind: "run";
  run_id: string;
  resource_name: string;
  completed_rounds: number;
  beam: string[];
  best: { version: string; score: number } | null;
  problems: ProblemCounts;
}

/** One prompt version as read back from the store. */
export interface PromptVersion {
  version: string;
  resourcesId: string;
  parent: string | null;
  round: number;
  template: PromptTemplate;
  critique: string | null;
  scores: ScoreEntry[];
  /** The latest full-validation score, else the latest batch score; null before any evaluation. */
  score: number | null;
  /** The rollout that records this version (its spans are the optimiser calls that made it). */
  rolloutId: string;
}

export interface PromptHistory {
  runId: string;
  resourceName: string;
  completedRounds: number;
  beam: string[];
  best: { version: string; score: number } | null;
  versions: PromptVersion[];
  rejected: RejectedRecord[];
  problems: ProblemCounts;
}

export function versionScore(scores: readonly ScoreEntry[]): number | null {
  const full = scores.filter((s) => s.split === "val_full");
  const pick = full.at(-1) ?? scores.at(-1);
  return pick ? pick.score : null;
}

export function versionNumber(version: string): number {
  const n = Number(/^v(\d+)$/.exec(version)?.[1]);
  return Number.isInteger(n) ? n : -1;
}

function apoMeta(r: Rollout): Record<string, any> | undefined {
  const m = r.metadata?.[APO_METADATA_KEY];
  return m && typeof m === "object" ? (m as Record<string, any>) : undefined;
}

/** Reads and writes one run's records. */
export class Journal {
  private runRolloutId: string | undefined;
  private readonly versionRollouts = new Map<string, { rolloutId: string; record: VersionRecord }>();

  constructor(
    readonly store: LightningStore,
    readonly runId: string,
  ) {}

  resourcesIdOf(version: string): string {
    return `${this.runId}-${version}`;
  }

  /** This run's history, or null when the store has no run under this id. */
  async load(): Promise<PromptHistory | null> {
    let run: { rolloutId: string; record: RunRecord } | undefined;
    const versions: Array<{ rolloutId: string; record: VersionRecord }> = [];
    const rejected: RejectedRecord[] = [];
    const pageSize = 500;
    for (let offset = 0; ; offset += pageSize) {
      const page = await this.store.queryRollouts({
        sortBy: "start_time",
        sortOrder: "asc",
        limit: pageSize,
        offset,
      });
      for (const rollout of page.items) {
        const meta = apoMeta(rollout);
        if (meta?.run_id !== this.runId) continue;
        if (meta.kind === "run") run = { rolloutId: rollout.rollout_id, record: meta as RunRecord };
        else if (meta.kind === "version")
          versions.push({ rolloutId: rollout.rollout_id, record: meta as VersionRecord });
        else if (meta.kind === "rejected") rejected.push(meta as RejectedRecord);
      }
      if (offset + page.items.length >= page.total || page.items.length === 0) break;
    }
    if (!run) return null;
    this.runRolloutId = run.rolloutId;
    versions.sort((a, b) => versionNumber(a.record.version) - versionNumber(b.record.version));
    const out: PromptVersion[] = [];
    for (const v of versions) {
      this.versionRollouts.set(v.record.version, v);
      const resources = await this.store.getResourcesById(v.record.resources_id);
      const template = resources?.resources[run.record.resource_name];
      if (template?.resource_type !== "prompt_template") continue;
      out.push({
        version: v.record.version,
        resourcesId: v.record.resources_id,
        parent: v.record.parent,
        round: v.record.round,
        template,
        critique: v.record.critique,
        scores: v.record.scores,
        score: versionScore(v.record.scores),
        rolloutId: v.rolloutId,
      });
    }
    return {
      runId: this.runId,
      resourceName: run.record.resource_name,
      completedRounds: run.record.completed_rounds,
      beam: run.record.beam,
      best: run.record.best,
      versions: out,
      rejected,
      problems: run.record.problems ?? {},
    };
  }

  async createRun(record: Omit<RunRecord, "kind" | "run_id">): Promise<void> {
    const rollout = await this.store.startRollout({
      input: { agl_apo_run: this.runId },
      metadata: { [APO_METADATA_KEY]: { kind: "run", run_id: this.runId, ...record } },
    });
    this.runRolloutId = rollout.rollout_id;
    await this.store.updateAttempt(rollout.rollout_id, rollout.attempt.attempt_id, { status: "succeeded" });
  }

  async updateRun(patch: Partial<Omit<RunRecord, "kind" | "run_id">>): Promise<void> {
    const id = this.runRolloutId;
    if (!id) throw new Error("apo journal: no run record to update");
    const rollout = await this.store.getRolloutById(id);
    const current = rollout ? apoMeta(rollout) : undefined;
    await this.store.updateRollout(id, {
      metadata: { ...(rollout?.metadata ?? {}), [APO_METADATA_KEY]: { ...current, ...patch } },
    });
  }

  /** A record rollout for one optimisation step; trace the optimiser calls into its attempt. */
  startStep(step: { parent: string; round: number; branch: number }): Promise<AttemptedRollout> {
    return this.store.startRollout({
      input: { agl_apo_step: { run_id: this.runId, ...step } },
      metadata: { [APO_METADATA_KEY]: { kind: "step", run_id: this.runId, ...step } },
    });
  }

  /** Close a step: a new version, or the reason there is none. */
  async finishStep(
    rollout: AttemptedRollout,
    outcome: Omit<VersionRecord, "kind" | "run_id"> | Omit<RejectedRecord, "kind" | "run_id">,
  ): Promise<void> {
    const record: VersionRecord | RejectedRecord =
      "version" in outcome
        ? { kind: "version", run_id: this.runId, ...outcome }
        : { kind: "rejected", run_id: this.runId, ...outcome };
    await this.store.updateRollout(rollout.rollout_id, { metadata: { [APO_METADATA_KEY]: record } });
    await this.store.updateAttempt(rollout.rollout_id, rollout.attempt.attempt_id, {
      status: record.kind === "version" ? "succeeded" : "failed",
      ...(record.kind === "rejected"
        ? { metadata: { error: { message: `${record.reason}: ${record.detail}` } } }
        : {}),
    });
    if (record.kind === "version")
      this.versionRollouts.set(record.version, { rolloutId: rollout.rollout_id, record });
  }

  /** The seed's record (it has no optimiser calls). */
  async recordSeed(outcome: Omit<VersionRecord, "kind" | "run_id">): Promise<void> {
    const rollout = await this.store.startRollout({
      input: { agl_apo_step: { run_id: this.runId, seed: true } },
      metadata: { [APO_METADATA_KEY]: { kind: "step", run_id: this.runId } },
    });
    await this.finishStep(rollout, outcome);
  }

  async addScore(version: string, entry: ScoreEntry): Promise<void> {
    const known = this.versionRollouts.get(version);
    if (!known) throw new Error(`apo journal: unknown version ${version}`);
    known.record = { ...known.record, scores: [...known.record.scores, entry] };
    await this.store.updateRollout(known.rolloutId, { metadata: { [APO_METADATA_KEY]: known.record } });
  }
}
