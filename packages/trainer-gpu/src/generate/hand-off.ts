import type { GenerateRequest } from "./request.js";
import { partitionForHandOff, type Seq } from "./sequence.js";

/**
 * Partial rollouts between generators: hand-offs a generator was asked for (`Generator.handOff`), run at its
 * next step boundary, and the group renumbering of sequences another generator adopts.
 */

/** What a hand-off works on: a generator's running rows (with their cache) and its queue. */
export interface HandOffBatch {
  active: Seq[];
  queue: Seq[];
  /** Keep only these running rows (indices, in order) in the batch cache. */
  keepRows(rows: number[]): void;
}

interface PendingHandOff {
  take: (req: GenerateRequest) => boolean;
  to: (seqs: Seq[]) => void;
}

export class HandOffs {
  private pending: PendingHandOff[] = [];

  /** Ask for the sequences `take` selects to be passed to `to` at the next `run`. */
  request(take: (req: GenerateRequest) => boolean, to: (seqs: Seq[]) => void): void {
    this.pending.push({ take, to });
  }

  /**
   * Take the selected running and queued sequences out of `batch` (running rows leave the cache too) and
   * pass them on; returns the rows and queue that stay.
   */
  run(batch: HandOffBatch): { active: Seq[]; queue: Seq[] } {
    let { active, queue } = batch;
    const pending = this.pending;
    this.pending = [];
    for (const { take, to } of pending) {
      const parts = partitionForHandOff(active, queue, take);
      if (parts.keepActive.length < active.length) {
        batch.keepRows(parts.keepActive);
        const from = active;
        active = parts.keepActive.map((i) => from[i] as Seq);
      }
      queue = parts.queue;
      to(parts.taken);
    }
    return { active, queue };
  }
}

/**
 * Give adopted sequences fresh group numbers from `nextGroup` (numbers are per generator), keeping the
 * sequences of one group together.
 */
export function renumberGroups(seqs: readonly Seq[], nextGroup: () => number): void {
  const groups = new Map<number, number>();
  for (const s of seqs) {
    if (!groups.has(s.group)) groups.set(s.group, nextGroup());
    s.group = groups.get(s.group) as number;
  }
}
