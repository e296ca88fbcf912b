/**
 * The multi-row operations of the SQLite store, run inside the caller's write transaction: claiming
 * queued rollouts, ingesting spans, and one watchdog pass. Each mutation is handed to `persist`
 * (with the row as loaded) as soon as it is complete. Status logic comes from @agl/core's state
 * machine through RolloutMutation.
 */
import type { Attempt, AttemptedRollout, Span } from "@agl/core";
import { attemptsBySpanRollout } from "../shared/records.js";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import { type RolloutRow, rolloutFromRow } from "./rows.js";
import type { LoadedRollout, SqliteDb } from "./sqlite-db.js";

export type Persist = (m: RolloutMutation, prev: RolloutRow | null, pop?: boolean) => void;

/** Claim up to `limit` queued rollouts in FIFO order; stale entries (no longer queuing-like) are popped and skipped. */
export function claimRollouts(
  db: SqliteDb,
  limit: number,
  workerId: string | null,
  now: number,
  persist: Persist,
): AttemptedRollout[] {
  const out: AttemptedRollout[] = [];
  while (out.length < limit) {
    const rows = db.stmt.queueHead.all(limit - out.length);
    if (rows.length === 0) break;
    for (const row of rows) {
      if (row.status !== "queuing" && row.status !== "requeuing") {
        db.stmt.popStale.run(row.rollout_id);
        continue;
      }
      // The previous attempts do not matter to a claim: it only appends a new latest one.
      const rollout = rolloutFromRow(row);
      const m = new RolloutMutation(rollout, null, row.attempt_count, now);
      const attempt = m.claim(workerId);
      persist(m, row, true);
      out.push({ ...rollout, attempt });
    }
  }
  if (out.length === 0 && workerId) {
    db.applyWorkerEvents([{ workerId, status: "idle", current: null, dequeued: true }], now);
  }
  return out;
}

/** Check every target first (a bad span stores nothing), insert, then record one activity per attempt. */
export function ingestSpans(db: SqliteDb, spans: readonly Span[], now: number, persist: Persist): Span[] {
  const rollouts = new Map<string, { loaded: LoadedRollout; attempts: Map<string, Attempt> }>();
  for (const s of spans) {
    let entry = rollouts.get(s.rollout_id);
    if (!entry) rollouts.set(s.rollout_id, (entry = { loaded: db.load(s.rollout_id), attempts: new Map() }));
    if (!entry.attempts.has(s.attempt_id))
      entry.attempts.set(s.attempt_id, db.attempt(entry.loaded, s.attempt_id));
  }
  const stored: Span[] = [];
  const maxSeq = new Map<string, number>();
  for (const s of spans) {
    if (!db.insertSpan(s)) continue;
    stored.push(s);
    maxSeq.set(s.rollout_id, Math.max(maxSeq.get(s.rollout_id) ?? 0, s.sequence_id));
  }
  for (const [rid, seq] of maxSeq) db.bumpSequence(rid, seq);
  for (const [rid, aids] of attemptsBySpanRollout(stored)) {
    const { loaded, attempts } = rollouts.get(rid)!;
    const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, now);
    for (const aid of aids) m.recordActivity(attempts.get(aid)!, now);
    persist(m, loaded.row);
  }
  return stored;
}

/**
 * One watchdog pass inside the write lock: re-read each due rollout and apply the verdict computed
 * from the current row, so an attempt is judged exactly once whichever process runs the pass.
 * Returns how many verdicts were applied and the earliest deadline left.
 */
export function expireDue(
  db: SqliteDb,
  now: number,
  persist: Persist,
): { applied: number; earliest: number | null } {
  let applied = 0;
  for (const row of db.stmt.dueRollouts.all(now, 1000)) {
    const loaded = db.load(row.rollout_id);
    const m = new RolloutMutation(loaded.rollout, loaded.latest, row.attempt_count, now);
    if (m.applyWatchdogVerdict()) applied++;
    persist(m, row);
  }
  return { applied, earliest: db.stmt.earliestDeadline.get()?.earliest ?? null };
}
