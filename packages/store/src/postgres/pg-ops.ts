/**
 * The multi-row operations of the PostgreSQL store, each run inside the caller's transaction and
 * returning the mutations to persist: claiming queued rollouts, ingesting spans, and one watchdog pass.
 * Status logic comes from @agl/core's state machine through RolloutMutation.
 */
import type { AttemptedRollout, Rollout, Span } from "@agl/core";
import { attemptsBySpanRollout } from "../shared/records.js";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import { toJson, toJsonRequired } from "../shared/schemas.js";
import {
  insertSpans,
  key,
  loadAttempts,
  loadedFrom,
  lockRollouts,
  type PersistItem,
  type PgLoaded,
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

export async function latestResourcesId(c: Queryable): Promise<string | null> {
  const { rows } = await c.query<{ resources_id: string }>({
    name: "agl_latest_resources_id",
    text: "SELECT resources_id FROM resources ORDER BY touch_seq DESC LIMIT 1",
  });
  return rows[0]?.resources_id ?? null;
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
    const { rows } = await c.query<PgRolloutRow>(
      `SELECT r.*, (r.input IS NULL) AS input_absent FROM rollouts r
       WHERE r.queue_seq IS NOT NULL AND NOT (r.rollout_id = ANY($2::text[]))
       ORDER BY r.queue_seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [limit - claimed.length, [...stale, ...items.map((i) => i.m.rollout.rollout_id)]],
    );
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
 * Lock the spans' rollouts (id order), check every target (a bad span stores nothing), insert, and
 * record one activity per attempt that got a span.
 */
export async function ingestSpans(
  c: Queryable,
  spans: readonly Span[],
  now: number,
): Promise<{ stored: Span[]; items: PersistItem[] }> {
  const loaded = await lockRollouts(
    c,
    spans.map((s) => s.rollout_id),
  );
  const targets = new Map<string, { loaded: PgLoaded; aid: string }>();
  for (const s of spans) {
    targets.set(key(s.rollout_id, s.attempt_id), { loaded: loaded.get(s.rollout_id)!, aid: s.attempt_id });
  }
  const attempts = await loadAttempts(c, [...targets.values()]);
  const spanKey = (s: Span) => `${key(s.rollout_id, s.attempt_id)}\u0000${s.span_id}`;
  // Keep the first of spans repeated within the batch, as sequential adds would.
  const seen = new Set<string>();
  const unique = spans.filter((s) => {
    const k = spanKey(s);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const storedKeys = await insertSpans(c, unique);
  const stored = unique.filter((s) => storedKeys.has(spanKey(s)));
  const items: PersistItem[] = [];
  for (const [rid, aids] of attemptsBySpanRollout(stored)) {
    const l = loaded.get(rid)!;
    const m = new RolloutMutation(l.rollout, l.latest, l.row.attempt_count, now);
    for (const aid of aids) m.recordActivity(attempts.get(key(rid, aid))!, now);
    items.push({ m, prev: l.row });
  }
  return { stored, items };
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
