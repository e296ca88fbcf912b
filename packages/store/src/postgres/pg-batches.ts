/**
 * The PostgreSQL store's group-committed writes: many concurrent calls of one kind in one
 * transaction, with the statements of a single call (one lock query, one multi-row insert, one
 * multi-table write) and one commit. Each call keeps its own outcome: a call whose rollout or
 * attempt does not exist gets its NotFoundError while the rest of the batch is stored.
 */
import {
  type Attempt,
  type AttemptedRollout,
  type AttemptPatchSchema,
  capSequenceId,
  type Span,
} from "@agl/core";
import type { z } from "zod";
import type { Settled } from "../shared/group-commit.js";
import { applyAttemptPatch } from "../shared/patches.js";
import { attemptsBySpanRollout, newRollout } from "../shared/records.js";
import { RolloutMutation } from "../shared/rollout-mutation.js";
import type { StartRolloutSchema } from "../shared/schemas.js";
import {
  attemptNotFound,
  findAttempts,
  key,
  lockExistingRollouts,
  type PersistItem,
  type PgLoaded,
  type Queryable,
  rolloutNotFound,
} from "./pg-db.js";
import { firstOfEachSpan } from "./pg-span-ingest.js";
import { allocateSequences, insertSpans, spanKey } from "./pg-spans.js";

export type StartRequest = z.output<typeof StartRolloutSchema>;

export interface BatchWrite<R> {
  results: Array<Settled<R>>;
  /** The mutations to persist (one per rollout touched). */
  items: PersistItem[];
  /** Called once the items are persisted, with what the persisting statement read. */
  after?: (persisted: { latestResources: string | null }) => void;
}

/** The spans of one call; `assign[i]` true: span i has no sequence id yet and gets the next one. */
export interface SpanJob {
  spans: Span[];
  assign?: readonly boolean[];
}

/**
 * Store the span lists of several calls: lock every rollout once, check each call's targets (a call
 * with a missing rollout or attempt stores nothing and gets the error), insert all in one statement
 * that also hands out the missing sequence ids (a span repeated within or across calls is stored
 * once, for the first call, as sequential calls would), and record one activity per attempt that
 * got a span. The stored spans carry the sequence ids they were given.
 */
export async function ingestSpanBatch(
  c: Queryable,
  jobs: readonly SpanJob[],
  now: number,
): Promise<BatchWrite<Span[]>> {
  const loaded = await lockExistingRollouts(
    c,
    jobs.flatMap((job) => job.spans.map((s) => s.rollout_id)),
  );
  const targets = new Map<string, { loaded: PgLoaded; aid: string }>();
  for (const { spans } of jobs)
    for (const s of spans) {
      const l = loaded.get(s.rollout_id);
      if (l) targets.set(key(s.rollout_id, s.attempt_id), { loaded: l, aid: s.attempt_id });
    }
  const attempts = await findAttempts(c, [...targets.values()]);
  const errors = jobs.map(({ spans }) => {
    // The same error, in the same order, as a call of its own would get.
    for (const s of spans) if (!loaded.has(s.rollout_id)) return rolloutNotFound(s.rollout_id);
    for (const s of spans)
      if (!attempts.has(key(s.rollout_id, s.attempt_id))) return attemptNotFound(s.rollout_id, s.attempt_id);
    return null;
  });
  const unique = firstOfEachSpan(jobs, (i) => errors[i] !== null);
  const all = unique.flat();
  await allocateMixed(c, all);
  const storedSeqs =
    all.length > 0
      ? await insertSpans(
          c,
          all.map((e) => e.span),
          all.map((e) => e.assign),
        )
      : new Map<string, number>();
  const stored = unique.map((entries) =>
    entries.flatMap(({ span }) => {
      const seq = storedSeqs.get(spanKey(span));
      if (seq === undefined) return [];
      span.sequence_id = seq;
      return [span];
    }),
  );
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

/**
 * A rollout with spans of both kinds in one batch (ids to hand out and ids chosen by clients) gets
 * its ids from a statement of its own first, as if they had been reserved before the call: the
 * insert moves each rollout's counter once.
 */
async function allocateMixed(c: Queryable, entries: Array<{ span: Span; assign: boolean }>): Promise<void> {
  const kinds = new Map<string, number>();
  for (const e of entries)
    kinds.set(e.span.rollout_id, (kinds.get(e.span.rollout_id) ?? 0) | (e.assign ? 1 : 2));
  const counts = new Map<string, number>();
  for (const e of entries)
    if (e.assign && kinds.get(e.span.rollout_id) === 3)
      counts.set(e.span.rollout_id, (counts.get(e.span.rollout_id) ?? 0) + 1);
  if (counts.size === 0) return;
  const last = await allocateSequences(c, counts);
  const next = new Map([...counts].map(([rid, n]) => [rid, last.get(rid)! - n + 1]));
  for (const e of entries) {
    const first = e.assign ? next.get(e.span.rollout_id) : undefined;
    if (first === undefined) continue;
    e.span.sequence_id = capSequenceId(first);
    next.set(e.span.rollout_id, first + 1);
    e.assign = false;
  }
}

/**
 * Start several rollouts with no statement of their own: the rows are inserted in their final state
 * by the statement that persists the items (one statement for the whole batch), which also reads the
 * latest resources id for the rollouts that name none.
 */
export function startRolloutBatch(
  requests: readonly StartRequest[],
  now: number,
): BatchWrite<AttemptedRollout> {
  const items: PersistItem[] = [];
  const results = requests.map((req): Settled<AttemptedRollout> => {
    const rollout = newRollout(req, "preparing", now, null);
    const m = new RolloutMutation(rollout, null, 0, now);
    const attempt = m.newAttempt(req.worker_id ?? null);
    items.push({ m, prev: null, insert: true });
    return { ok: true, value: { ...rollout, attempt } };
  });
  const after = ({ latestResources }: { latestResources: string | null }) => {
    for (const r of results)
      if (r.ok && r.value.resources_id === null) r.value.resources_id = latestResources;
  };
  return { results, items, after };
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
