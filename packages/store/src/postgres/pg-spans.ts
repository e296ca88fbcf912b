/**
 * Span rows and the per-rollout sequence counter of the PostgreSQL store. Spans that arrive without
 * a sequence id (OTLP exports, OpenTelemetry spans) get theirs inside the statement that inserts
 * them, so storing them costs one statement and one commit instead of an allocation committed on its
 * own before the insert.
 */
import { MAX_SPAN_SEQUENCE_ID, type Span } from "@agl/core";
import type { Settled } from "../shared/group-commit.js";
import { toJsonRequired } from "../shared/schemas.js";
import { key, type Queryable } from "./pg-db.js";

/** A span's identity in a batch: (rollout, attempt, span id). */
export const spanKey = (s: Pick<Span, "rollout_id" | "attempt_id" | "span_id">): string =>
  `${key(s.rollout_id, s.attempt_id)}\u0000${s.span_id}`;

/**
 * The span rows as column arrays, in the order of the span statements' parameters: rollout, attempt,
 * sequence id, trace id, span id, parent id, name, start, end, and the whole span as JSON text.
 */
export function spanColumns(spans: readonly Span[]): unknown[][] {
  return [
    spans.map((s) => s.rollout_id),
    spans.map((s) => s.attempt_id),
    spans.map((s) => s.sequence_id),
    spans.map((s) => s.trace_id),
    spans.map((s) => s.span_id),
    spans.map((s) => s.parent_id),
    spans.map((s) => s.name),
    spans.map((s) => s.start_time),
    spans.map((s) => s.end_time),
    spans.map((s) => toJsonRequired(s, "span")),
  ];
}

/**
 * Insert spans (duplicates of (rid, aid, span_id) skipped) in one statement; returns the sequence id
 * stored for each span stored, by spanKey.
 *
 * Spans with `assign[i]` true get the next ids of their rollout's counter, in batch order, exactly as
 * allocateSequences would hand them out (same saturation at MAX_SPAN_SEQUENCE_ID); their `data`
 * carries the id given. The counter of every other rollout is raised to the highest id stored, so
 * ids handed out later come after the ones clients chose. A rollout must not have both kinds in one
 * call (its counter would move twice in one statement): ingestSpanBatch allocates those beforehand.
 */
export async function insertSpans(
  c: Queryable,
  spans: readonly Span[],
  assign: readonly boolean[],
): Promise<Map<string, number>> {
  const values = spanColumns(spans);
  // Spans that all carry their ids (the Python client's add_span) take the simpler statement.
  const assigning = assign.some(Boolean);
  const { rows } = await c.query<{
    rollout_id: string;
    attempt_id: string;
    span_id: string;
    sequence_id: number;
  }>(
    assigning
      ? {
          name: "agl_insert_spans_assigning",
          text: INSERT_ASSIGNING,
          values: [...values, spans.map((_, i) => assign[i] === true)],
        }
      : { name: "agl_insert_spans", text: INSERT_GIVEN, values },
  );
  return new Map(rows.map((r) => [spanKey(r), r.sequence_id]));
}

/** Spans with their ids, some (`assign`) to be handed out here: see insertSpans. */
const INSERT_ASSIGNING = `WITH t AS (
       SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[],
         $8::float8[], $9::float8[], $10::text[], $11::bool[])
         WITH ORDINALITY AS t(rid, aid, seq, tid, sid, pid, name, st, et, data, assign, ord)
     ), need AS (
       SELECT rid, COUNT(*)::int AS n FROM t WHERE assign GROUP BY rid
     ), alloc AS (
       INSERT INTO span_sequences (rollout_id, value) SELECT rid, n FROM need
       ON CONFLICT (rollout_id) DO UPDATE SET value = LEAST(span_sequences.value, ${MAX_SPAN_SEQUENCE_ID}) + EXCLUDED.value
       RETURNING rollout_id, value
     ), numbered AS (
       SELECT t.*, CASE WHEN t.assign THEN LEAST(
           a.value - need.n + ROW_NUMBER() OVER (PARTITION BY t.rid, t.assign ORDER BY t.ord), ${MAX_SPAN_SEQUENCE_ID})
         ELSE t.seq END AS given
       FROM t LEFT JOIN need ON need.rid = t.rid LEFT JOIN alloc a ON a.rollout_id = t.rid
     ), ins AS (
       INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time, end_time, data)
       SELECT rid, aid, given, tid, sid, pid, name, st, et,
         CASE WHEN assign THEN jsonb_set(data::jsonb, '{sequence_id}', to_jsonb(given)) ELSE data::jsonb END
       FROM numbered ORDER BY ord
       ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
       RETURNING rollout_id, attempt_id, span_id, sequence_id
     ), bump AS (
       INSERT INTO span_sequences (rollout_id, value)
       SELECT rollout_id, MAX(sequence_id) FROM ins WHERE rollout_id NOT IN (SELECT rid FROM need) GROUP BY rollout_id
       ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(span_sequences.value, EXCLUDED.value)
     )
     SELECT rollout_id, attempt_id, span_id, sequence_id FROM ins`;

/** Spans that all carry their ids: insert, and raise each rollout's counter to the highest stored. */
const INSERT_GIVEN = `WITH ins AS (
       INSERT INTO spans (rollout_id, attempt_id, sequence_id, trace_id, span_id, parent_id, name, start_time, end_time, data)
       SELECT rid, aid, seq, tid, sid, pid, name, st, et, data::jsonb
       FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[], $9::float8[], $10::text[])
         WITH ORDINALITY AS t(rid, aid, seq, tid, sid, pid, name, st, et, data, ord)
       ORDER BY ord
       ON CONFLICT (rollout_id, attempt_id, span_id) DO NOTHING
       RETURNING rollout_id, attempt_id, span_id, sequence_id
     ), bump AS (
       INSERT INTO span_sequences (rollout_id, value)
       SELECT rollout_id, MAX(sequence_id) FROM ins GROUP BY rollout_id
       ON CONFLICT (rollout_id) DO UPDATE SET value = GREATEST(span_sequences.value, EXCLUDED.value)
     )
     SELECT rollout_id, attempt_id, span_id, sequence_id FROM ins`;

/**
 * Allocate `count` consecutive sequence ids per rollout atomically; returns the last one of each. The
 * counter restarts from at most MAX_SPAN_SEQUENCE_ID, so it stays far inside INTEGER; callers cap what
 * they hand out (capSequenceId).
 */
export async function allocateSequences(
  c: Queryable,
  counts: ReadonlyMap<string, number>,
): Promise<Map<string, number>> {
  const { rows } = await c.query<{ rollout_id: string; value: number }>({
    name: "agl_allocate_sequences",
    text: `INSERT INTO span_sequences (rollout_id, value) SELECT * FROM unnest($1::text[], $2::int[])
     ON CONFLICT (rollout_id) DO UPDATE SET value = LEAST(span_sequences.value, ${MAX_SPAN_SEQUENCE_ID}) + EXCLUDED.value
     RETURNING rollout_id, value`,
    values: [[...counts.keys()], [...counts.values()]],
  });
  return new Map(rows.map((r) => [r.rollout_id, r.value]));
}

/**
 * The sequence blocks of several reservations in one atomic statement: each call gets, per rollout,
 * the first id of its block, blocks following each other in call order.
 */
export async function allocateBlocks(
  c: Queryable,
  jobs: ReadonlyArray<Map<string, number>>,
): Promise<Array<Settled<Map<string, number>>>> {
  const totals = new Map<string, number>();
  for (const counts of jobs) for (const [rid, n] of counts) totals.set(rid, (totals.get(rid) ?? 0) + n);
  const last = await allocateSequences(c, totals);
  const next = new Map([...totals].map(([rid, n]) => [rid, last.get(rid)! - n + 1]));
  return jobs.map((counts) => {
    const firsts = new Map<string, number>();
    for (const [rid, n] of counts) {
      firsts.set(rid, next.get(rid)!);
      next.set(rid, next.get(rid)! + n);
    }
    return { ok: true, value: firsts };
  });
}
