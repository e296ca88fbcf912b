/**
 * The multi-row operations of the PostgreSQL store, each run inside the caller's transaction and
 * returning the mutations to persist: inserting rollouts, claiming queued ones, and one watchdog pass
 * (spans: pg-batches.ts and pg-spans.ts).
 * Status logic comes from @agl/core's state machine through RolloutMutation.
 */
import type { AttemptedRollout, Rollout } from "@agl/core";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";
import {
  loadedFrom,
  type PersistItem,
  type PgRolloutRow,
  type Queryable,
  ROLLOUT_COLS,
  readLatestAttempts,
  rolloutFromPg,
} from "./pg-db.js";

/** Insert rollouts in one statement, in order; `queueSeqs[i]` null = not queued. */
export async function insertRollouts(
  c: Queryable,
  rollouts: readonly Rollout[],
  queueSeqs: ReadonlyArray<string | null>,
): Promise<void> {
  await c.query({
    name: "agl_insert_rollouts",
    text: `INSERT INTO rollouts (rollout_id, input, start_time, end_time, mode, resources_id, status, config, metadata, queue_seq)
     SELECT rid, input::jsonb, st, et, mode, res, status, config::jsonb, md::jsonb, qs
     FROM unnest($1::text[], $2::text[], $3::float8[], $4::float8[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[])
       WITH ORDINALITY AS t(rid, input, st, et, mode, res, status, config, md, qs, ord)
     ORDER BY ord`,
    values: [
      rollouts.map((r) => r.rollout_id),
      rollouts.map((r) => toJson(r.input, "input")),
      rollouts.map((r) => r.start_time),
      rollouts.map((r) => r.end_time),
      rollouts.map((r) => r.mode),
      rollouts.map((r) => r.resources_id),
      rollouts.map((r) => r.status),
      rollouts.map((r) => toJsonRequired(r.config, "config")),
      rollouts.map((r) => toJsonRequired(r.metadata, "metadata")),
      queueSeqs,
    ],
  });
}

/** Write the patchable fields of a rollout (its status goes through RolloutMutation). */
export async function updateRolloutFields(c: Queryable, rollout: Rollout): Promise<void> {
  await c.query(
    `UPDATE rollouts SET input = $2::jsonb, mode = $3, resources_id = $4, config = $5::jsonb, metadata = $6::jsonb
     WHERE rollout_id = $1`,
    [
      rollout.rollout_id,
      toJson(rollout.input, "input"),
      rollout.mode,
      rollout.resources_id,
      toJsonRequired(rollout.config, "config"),
      toJsonRequired(rollout.metadata, "metadata"),
    ],
  );
}

/**
 * Claim up to `limit` queued rollouts in FIFO order. Rows another process is claiming are skipped,
 * never waited for (`SKIP LOCKED`): no double claims and no convoy. Stale entries (no longer
 * queuing-like) are popped and skipped, as in memory.
 */
export async function claimRollouts(
  c: Queryable,
  limit: number,
  workerId: string | null,
  now: number,
): Promise<{ claimed: AttemptedRollout[]; items: PersistItem[]; stale: string[] }> {
  const claimed: AttemptedRollout[] = [];
  const items: PersistItem[] = [];
  const stale: string[] = [];
  while (claimed.length < limit) {
    const { rows } = await c.query<PgRolloutRow>({
      name: "agl_claim_rollouts",
      text: `SELECT r.*, (r.input IS NULL) AS input_absent FROM rollouts r
       WHERE r.queue_seq IS NOT NULL AND NOT (r.rollout_id = ANY($2::text[]))
       ORDER BY r.queue_seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
      values: [limit - claimed.length, [...stale, ...items.map((i) => i.m.rollout.rollout_id)]],
    });
    if (rows.length === 0) break;
    for (const row of rows) {
      if (row.status !== "queuing" && row.status !== "requeuing") {
        stale.push(row.rollout_id);
        continue;
      }
      // The previous attempts do not matter to a claim: it only appends a new latest one.
      const rollout = rolloutFromPg(row);
      const m = new RolloutMutation(rollout, null, row.attempt_count, now);
      const attempt = m.claim(workerId);
      items.push({ m, prev: row, pop: true });
      claimed.push({ ...rollout, attempt });
    }
  }
  return { claimed, items, stale };
}

/**
 * One watchdog pass: lock due rollouts, skipping rows another instance holds, and apply the verdict
 * computed from the locked row, so each attempt is judged exactly once whichever instance runs it.
 */
export async function expireDue(
  c: Queryable,
  now: number,
): Promise<{ items: PersistItem[]; applied: number; terminal: string[] }> {
  const { rows } = await c.query<PgRolloutRow>(
    `SELECT ${ROLLOUT_COLS} FROM rollouts r WHERE r.deadline < $1 ORDER BY r.deadline LIMIT 500 FOR UPDATE OF r SKIP LOCKED`,
    [now],
  );
  await readLatestAttempts(c, rows);
  const due = rows.map(loadedFrom);
  let applied = 0;
  const terminal: string[] = [];
  const items = due.map((loaded): PersistItem => {
    const m = new RolloutMutation(loaded.rollout, loaded.latest, loaded.row.attempt_count, now);
    if (m.applyWatchdogVerdict()) applied++;
    if (m.terminal) terminal.push(loaded.rollout.rollout_id);
    return { m, prev: loaded.row };
  });
  return { items, applied, terminal };
}
