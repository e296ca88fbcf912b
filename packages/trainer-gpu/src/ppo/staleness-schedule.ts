/**
 * Admission control and batch formation for asynchronous PPO (`rollout.max_staleness` = k > 0).
 *
 * Rollouts come in GRPO groups (the `rollout.n` rollouts of one sample), numbered in data order; a step
 * trains `batchGroups` groups. Versions count completed steps: the weights of version v are the ones
 * the trainer holds after v steps, and step v + 1 trains on top of them.
 *
 * - Admission: a group may be enqueued while version v is served only if g < (v + k + 1) * batchGroups,
 *   which gives it a deadline: it must be trained by step v + k + 1, i.e. by weights at most k versions
 *   newer than the ones that start sampling it.
 * - Batches: step s takes the `batchGroups` finished, untrained groups with the earliest deadlines
 *   (oldest first), but only if what remains can still meet its deadlines: for every t > s, the groups
 *   left with deadline <= t must fit in the steps s+1..t. Otherwise the step waits for more groups to
 *   finish. A slow group is therefore never dropped and never overtaken past its deadline; the trainer
 *   waits for it at the latest at its deadline.
 *
 * With k = 0 this is the synchronous loop: step s admits exactly its own groups and trains all of them.
 */
export interface GroupInfo {
  id: number;
  /** Version served when the group was admitted. */
  admittedAt: number;
  /** The last step allowed to train it (admittedAt + k + 1). */
  deadline: number;
  finished: boolean;
  trained: boolean;
}

export class StalenessScheduler {
  private readonly groups = new Map<number, GroupInfo>();
  private nextGroup: number;

  /**
   * @param batchGroups groups per step
   * @param maxStaleness k
   * @param firstGroup the first group to admit (steps already trained x batchGroups when resuming)
   * @param endGroup one past the last group of the run (total steps x batchGroups)
   */
  constructor(
    readonly batchGroups: number,
    readonly maxStaleness: number,
    firstGroup: number,
    readonly endGroup: number,
  ) {
    if (!Number.isInteger(batchGroups) || batchGroups < 1) throw new RangeError("batchGroups must be >= 1");
    if (!Number.isInteger(maxStaleness) || maxStaleness < 0)
      throw new RangeError("maxStaleness must be >= 0");
    this.nextGroup = firstGroup;
  }

  /** Admit every group that version `version` may start; returns their ids in data order. */
  admit(version: number): number[] {
    const cap = Math.min((version + this.maxStaleness + 1) * this.batchGroups, this.endGroup);
    const out: number[] = [];
    for (; this.nextGroup < cap; this.nextGroup++) {
      const id = this.nextGroup;
      this.groups.set(id, {
        id,
        admittedAt: version,
        deadline: version + this.maxStaleness + 1,
        finished: false,
        trained: false,
      });
      out.push(id);
    }
    return out;
  }

  /** Every rollout of group `id` has ended. */
  finish(id: number): void {
    const g = this.groups.get(id);
    if (!g) throw new RangeError(`group ${id} was never admitted`);
    g.finished = true;
  }

  info(id: number): GroupInfo | undefined {
    return this.groups.get(id);
  }

  /** Admitted groups not trained yet (finished or not). */
  get untrained(): GroupInfo[] {
    return [...this.groups.values()].filter((g) => !g.trained);
  }

  /**
   * The groups step `step` trains (earliest deadline first, then data order), marked trained; null when
   * the step must wait for more groups to finish.
   */
  takeBatch(step: number): number[] | null {
    const byUrgency = (a: GroupInfo, b: GroupInfo) => a.deadline - b.deadline || a.id - b.id;
    const ready = this.untrained.filter((g) => g.finished).sort(byUrgency);
    if (ready.length < this.batchGroups) {
      // The end of the run: fewer groups than a batch remain and all of them are done.
      const rest = this.untrained;
      if (!(this.nextGroup >= this.endGroup && rest.length > 0 && rest.every((g) => g.finished))) return null;
    }
    const batch = ready.slice(0, this.batchGroups);
    const taken = new Set(batch.map((g) => g.id));
    const left = this.untrained.filter((g) => !taken.has(g.id)).sort(byUrgency);
    for (let i = 0; i < left.length; i++) {
      const t = left[i]!.deadline;
      // i + 1 groups (at least) with a deadline <= t remain; steps step+1..t train (t - step) batches.
      if (i + 1 > (t - step) * this.batchGroups) return null;
    }
    for (const g of batch) {
      g.trained = true;
      this.groups.delete(g.id);
    }
    return batch.map((g) => g.id).sort((a, b) => a - b);
  }
}
