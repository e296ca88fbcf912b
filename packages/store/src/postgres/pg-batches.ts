/**
 * The PostgreSQL store's group-committed writes: many concurrent calls of one kind in one
 * transaction, with the statements of a single call (one lock query, one multi-row insert, one
 * multi-table write) and one commit. Each call keeps its own outcome: a call whose rollout or
 * attempt does not exist gets its NotFoundError while the rest of the batch is stored.
 */
import type { Attempt, AttemptedRollout, AttemptPatchSchema, Span } from "@agl/core";
import type { z } from "zod";
import type { Settled } from "../shared/group-commit.js";
import { applyAttemptPatch } from "../shared/patches.js";
import { attemptsBySpanRollout, newRollout } from "../shared/records.js";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import type { StartRolloutSchema } from "../shared/schemas.js";
import {
  attemptNotFound,
  findAttempts,
  insertSpans,
  key,
  lockExistingRollouts,
  type PersistItem,
  type PgLoaded,
  type Queryable,
  rolloutNotFound,
} from "./pg-db.js";
import { insertRollouts, latestResourcesId } from "./pg-ops.js";

export type StartRequest = z.output<typeof StartRolloutSchema>;

export interface BatchWrite<R> {
  results: Array<Settled<R>>;
  /** The mutations to persist (one per rollout touched). */
  items: PersistItem[];
}

const spanKey = (s: Span) => `${key(s.rollout_id, s.attempt_id)}\u0000${s.span_id}`;

/**
 * Store the span lists of several calls: lock every rollout once, check each call's targets (a call
 * with a missing rollout or attempt stores nothing and gets the error), insert all in one statement
 * (a span repeated within or across calls is stored once, for the first call, as sequential calls
 * would), and record one activity per attempt that got a span.
 */
export async function ingestSpanBatch(
  c: Queryable,
  jobs: ReadonlyArray<readonly Span[]>,
  now: number,
): Promise<BatchWrite<Span[]>> {
  const loaded = await lockExistingRollouts(
    c,
    jobs.flatMap((spans) => spans.map((s) => s.rollout_id)),
  );
  const targets = new Map<string, { loaded: PgLoaded; aid: string }>();
  for (const spans of jobs)
    for (const s of spans) {
      const l = loaded.get(s.rollout_id);
      if (l) targets.set(key(s.rollout_id, s.attempt_id), { loaded: l, aid: s.attempt_id });
    }
  const attempts = await findAttempts(c, [...targets.values()]);
  const errors = jobs.map((spans) => {
    // The same error, in the same order, as a call of its own would get.
    for (const s of spans) if (!loaded.has(s.rollout_id)) return rolloutNotFound(s.rollout_id);
    for (const s of spans)
      if (!attempts.has(key(s.rollout_id, s.attempt_id))) return attemptNotFound(s.rollout_id, s.attempt_id);
    return null;
  });
  const seen = new Set<string>();
  const unique: Span[][] = jobs.map((spans, i) =>
    errors[i]
      ? []
      : spans.filter((s) => {
          const k = spanKey(s);
          if (seen.has(k)) return false;
          seen.add(k);
          return true;
        }),
  );
  const all = unique.flat();
  const storedKeys = all.length > 0 ? await insertSpans(c, all) : new Set<string>();
  const stored = unique.map((spans) => spans.filter((s) => storedKeys.has(spanKey(s))));
  const items: PersistItem[] = [];
  for (const [rid, aids] of attemptsBySpanRollout(stored.flat())) {
    const l = loaded.get(rid)!;
    const m = new RolloutMutation(l.rollout, l.latest, l.row.attempt_count, now);
    for (const aid of aids) m.recordActivity(attempts.get(key(rid, aid))!, now);
    items.push({ m, prev: l.row });
  }
  const results = jobs.map((_, i): Settled<Span[]> => {
    const error = errors[i];
    return error ? { ok: false, error } : { ok: true, value: stored[i]! };
  });
  return { results, items };
}

/** Start several rollouts: the latest resources read once, one multi-row insert per table. */
export async function startRolloutBatch(
  c: Queryable,
  requests: readonly StartRequest[],
  now: number,
): Promise<BatchWrite<AttemptedRollout>> {
  const latest = await latestResourcesId(c);
  const rollouts = requests.map((req) => newRollout(req, "preparing", now, latest));
  await insertRollouts(
    c,
    rollouts,
    rollouts.map(() => null),
  );
  const items: PersistItem[] = [];
  const results = rollouts.map((rollout, i): Settled<AttemptedRollout> => {
    const m = new RolloutMutation(rollout, null, 0, now);
    const attempt = m.newAttempt(requests[i]!.worker_id ?? null);
    items.push({ m, prev: null });
    return { ok: true, value: { ...rollout, attempt } };
  });
  return { results, items };
}

export interface AttemptUpdate {
  rid: string;
  aid: string;
  patch: z.output<typeof AttemptPatchSchema>;
}

/**
 * Apply attempt patches of distinct rollouts (the group commit keys them by rollout): lock all,
 * apply each through its own mutation; a patch that fails (not found, a refused transition) leaves
 * its rollout untouched and fails only its call.
 */
export async function updateAttemptBatch(
  c: Queryable,
  updates: readonly AttemptUpdate[],
  now: number,
): Promise<BatchWrite<Attempt>> {
  const loaded = await lockExistingRollouts(
    c,
    updates.map((u) => u.rid),
  );
  const attempts = await findAttempts(
    c,
    updates.flatMap((u) => {
      const l = loaded.get(u.rid);
      return l ? [{ loaded: l, aid: u.aid }] : [];
    }),
  );
  const items: PersistItem[] = [];
  const results = updates.map((u): Settled<Attempt> => {
    const l = loaded.get(u.rid);
    if (!l) return { ok: false, error: rolloutNotFound(u.rid) };
    const attempt = attempts.get(key(u.rid, u.aid));
    if (!attempt) return { ok: false, error: attemptNotFound(u.rid, u.aid) };
    // The patch works on copies, so a refused one leaves nothing half-applied for the others.
    const latest = l.latest ? { ...l.latest } : null;
    const target = latest && attempt === l.latest ? latest : { ...attempt };
    const m = new RolloutMutation({ ...l.rollout }, latest, l.row.attempt_count, now);
    try {
      applyAttemptPatch(m, target, u.patch);
    } catch (error) {
      return { ok: false, error };
    }
    items.push({ m, prev: l.row });
    return { ok: true, value: target };
  });
  return { results, items };
}
