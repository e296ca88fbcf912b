/**
 * A deliberately tiny, independent reference model of the store's state machine (written from the
 * spec tables, sharing no code with the stores) for the model-based test. It tracks only what the
 * random commands can observe: statuses, attempt counts, the queue, sequence counters, resources.
 */

type RS = "queuing" | "preparing" | "running" | "failed" | "succeeded" | "cancelled" | "requeuing";
type AS = "preparing" | "running" | "failed" | "succeeded" | "unresponsive" | "timeout";
export type ModelRolloutStatus = RS;
export type ModelAttemptStatus = AS;

// Allowed moves, written as "from>to" pairs; staying in the same status is always allowed.
const ROLLOUT_MOVES = new Set(
  [
    "queuing>preparing running cancelled failed requeuing",
    "requeuing>preparing running cancelled failed queuing",
    "preparing>running succeeded failed requeuing queuing cancelled",
    "running>preparing succeeded failed requeuing queuing cancelled",
    "failed>queuing requeuing preparing",
    "succeeded>queuing requeuing preparing",
    "cancelled>queuing requeuing preparing",
  ].flatMap((line) => {
    const [from, tos] = line.split(">");
    return tos!.split(" ").map((to) => `${from}>${to}`);
  }),
);
const ATTEMPT_MOVES = new Set(
  [
    "preparing>running succeeded failed timeout unresponsive",
    "running>succeeded failed timeout unresponsive",
    "unresponsive>running succeeded failed timeout",
  ].flatMap((line) => {
    const [from, tos] = line.split(">");
    return tos!.split(" ").map((to) => `${from}>${to}`);
  }),
);

export const rolloutMoveOk = (from: RS, to: RS): boolean => from === to || ROLLOUT_MOVES.has(`${from}>${to}`);
export const attemptMoveOk = (from: AS, to: AS): boolean => from === to || ATTEMPT_MOVES.has(`${from}>${to}`);

export interface ModelAttempt {
  id: string;
  status: AS;
}

export interface ModelRollout {
  id: string;
  status: RS;
  maxAttempts: number;
  retryOn: AS[];
  attempts: ModelAttempt[];
  resourcesId: string | null;
}

export interface ModelResources {
  id: string;
  version: number;
}

export class StoreModel {
  rollouts: ModelRollout[] = [];
  /** Rollout ids in FIFO order, stale entries included, each at most once. */
  queue: string[] = [];
  seq = new Map<string, number>();
  spanKeys = new Set<string>();
  resources: ModelResources[] = [];
  latestResources: string | null = null;

  find(id: string): ModelRollout | undefined {
    return this.rollouts.find((r) => r.id === id);
  }

  private queueUp(r: ModelRollout): void {
    if ((r.status === "queuing" || r.status === "requeuing") && !this.queue.includes(r.id))
      this.queue.push(r.id);
  }

  addRollout(r: Omit<ModelRollout, "attempts" | "resourcesId">): void {
    const rollout = { ...r, attempts: [], resourcesId: this.latestResources };
    this.rollouts.push(rollout);
    this.queueUp(rollout);
  }

  addAttempt(r: ModelRollout, attemptId: string): void {
    r.attempts.push({ id: attemptId, status: "preparing" });
    r.status = "preparing";
  }

  /** The rollout the next dequeue must return, consuming stale entries; null when none. */
  takeNext(): ModelRollout | null {
    while (this.queue.length > 0) {
      const r = this.find(this.queue.shift()!)!;
      if (r.status === "queuing" || r.status === "requeuing") return r;
    }
    return null;
  }

  /** Apply an attempt status; returns false when the move is illegal (nothing changes). */
  setAttempt(r: ModelRollout, index: number, to: AS): boolean {
    const attempt = r.attempts[index]!;
    if (!attemptMoveOk(attempt.status, to)) return false;
    const latestIndex = r.attempts.length - 1;
    const newSuccess = to === "succeeded" && attempt.status !== "succeeded";
    const finished = r.status === "succeeded" || r.status === "failed" || r.status === "cancelled";
    // A second success (an older attempt after the rollout succeeded) is refused.
    if (newSuccess && index !== latestIndex && r.status === "succeeded") return false;
    attempt.status = to;
    if (index !== latestIndex) {
      // An older attempt's late success wins: the rollout succeeds, a live latest attempt fails.
      if (newSuccess && !finished) {
        const latest = r.attempts[latestIndex]!;
        if (latest.status !== "failed" && latest.status !== "succeeded" && latest.status !== "timeout") {
          latest.status = "failed";
        }
        r.status = "succeeded";
      }
      return true;
    }
    let next: RS;
    if (to === "preparing" || to === "running" || to === "succeeded") next = to;
    else next = r.retryOn.includes(to) && index + 1 < r.maxAttempts ? "requeuing" : "failed";
    // A success always finishes an unfinished rollout (requeuing included).
    if ((to === "succeeded" && !finished) || rolloutMoveOk(r.status, next)) {
      r.status = next;
      this.queueUp(r);
    }
    return true;
  }

  /** Set a rollout status directly; false when illegal. */
  setRollout(r: ModelRollout, to: RS): boolean {
    if (!rolloutMoveOk(r.status, to)) return false;
    r.status = to;
    this.queueUp(r);
    return true;
  }

  /** A span arrived for attempt `index`. */
  activity(r: ModelRollout, index: number): void {
    const attempt = r.attempts[index]!;
    if (attempt.status === "preparing" || attempt.status === "unresponsive") attempt.status = "running";
    const latest = index === r.attempts.length - 1;
    if (latest && attempt.status === "running" && (r.status === "preparing" || r.status === "requeuing")) {
      r.status = "running";
    }
  }

  nextSeq(id: string): number {
    const n = (this.seq.get(id) ?? 0) + 1;
    this.seq.set(id, n);
    return n;
  }

  bumpSeq(id: string, value: number): void {
    this.seq.set(id, Math.max(this.seq.get(id) ?? 0, value));
  }

  putResources(id: string): number {
    const existing = this.resources.find((x) => x.id === id);
    if (existing) existing.version++;
    else this.resources.push({ id, version: 1 });
    this.latestResources = id;
    return existing ? existing.version : 1;
  }
}
