/**
 * Span batches in one round trip: a function of the migrations locks the rollouts, checks the
 * targets, hands out the missing sequence ids, inserts the spans and records their activity
 * (heartbeat; a first span moves a preparing attempt and its rollout to running; the watchdog
 * deadline), all in one call that PostgreSQL commits before it answers: `agl_ingest_one_span` for a
 * single span (an OTLP export from OtelTracer, one add_span), `agl_ingest_attempt_spans` for spans of
 * one attempt (a batched OTLP export), `agl_ingest_spans` for any other batch.
 * Batches they do not cover (see the migrations) get `null` here, and the store runs its general
 * transaction (ingestSpanBatch).
 */
import type { Span } from "@agl/core";
import type { Settled } from "../shared/group-commit.js";
import { toJsonRequired } from "../shared/schemas.js";
import type { SpanJob } from "./pg-batches.js";
import type { Queryable } from "./pg-db.js";
import { spanColumns, spanKey } from "./pg-spans.js";

export interface IngestedAtOnce {
  results: Array<Settled<Span[]>>;
  /** The watchdog deadline of each rollout that got a span (for the in-process timer). */
  deadlines: Array<number | null>;
}

/**
 * Each job's spans without the repeats of a span (same rollout, attempt and span id) already in the
 * batch: sequential calls would store it once, for the first call.
 */
export function firstOfEachSpan(
  jobs: readonly SpanJob[],
  skip: (job: number) => boolean = () => false,
): Array<Array<{ span: Span; assign: boolean }>> {
  const seen = new Set<string>();
  return jobs.map((job, i) =>
    skip(i)
      ? []
      : job.spans.flatMap((span, j) => {
          const k = spanKey(span);
          if (seen.has(k)) return [];
          seen.add(k);
          return [{ span, assign: job.assign?.[j] === true }];
        }),
  );
}

/** Store a span batch with one call of agl_ingest_spans; null when the batch needs the general path. */
export async function ingestSpansAtOnce(
  c: Queryable,
  jobs: readonly SpanJob[],
  now: number,
): Promise<IngestedAtOnce | null> {
  const unique = firstOfEachSpan(jobs);
  const all = unique.flat();
  if (all.length === 0) return null;
  const rows =
    all.length === 1
      ? await callForOneSpan(c, all[0]!, now)
      : oneAttempt(all)
        ? await callForOneAttempt(c, all, now)
        : await callForMany(c, all, now);
  if (rows.length === 1 && rows[0]!.o_rid === null) return null;
  const stored = new Map(
    rows.map((r) => [spanKey({ rollout_id: r.o_rid!, attempt_id: r.o_aid!, span_id: r.o_sid! }), r.o_seq!]),
  );
  const deadlines = new Map(rows.map((r) => [r.o_rid!, r.o_deadline]));
  const results = unique.map(
    (entries): Settled<Span[]> => ({
      ok: true,
      value: entries.flatMap(({ span }) => {
        const seq = stored.get(spanKey(span));
        if (seq === undefined) return [];
        span.sequence_id = seq;
        return [span];
      }),
    }),
  );
  return { results, deadlines: [...deadlines.values()] };
}

/** A stored span, or (o_rid NULL, every column NULL) the one answer of a call that covered nothing. */
interface IngestRow {
  o_rid: string | null;
  o_aid: string | null;
  o_sid: string | null;
  o_seq: number | null;
  o_deadline: number | null;
}

type Entry = { span: Span; assign: boolean };

/** Spans of one attempt, all with or all without their sequence ids: agl_ingest_attempt_spans's case. */
function oneAttempt(all: readonly Entry[]): boolean {
  const { rollout_id, attempt_id } = all[0]!.span;
  const assign = all[0]!.assign;
  return all.every(
    (e) => e.span.rollout_id === rollout_id && e.span.attempt_id === attempt_id && e.assign === assign,
  );
}

/** Migration 4's function: the attempt as scalars, the spans' JSON as one array (no array literal to escape). */
export async function callForOneAttempt(
  c: Queryable,
  all: readonly Entry[],
  now: number,
): Promise<IngestRow[]> {
  const spans = all.map((e) => e.span);
  const first = spans[0]!;
  const { rows } = await c.query<IngestRow>({
    name: "agl_ingest_attempt_spans",
    text: "SELECT * FROM agl_ingest_attempt_spans($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    values: [
      first.rollout_id,
      first.attempt_id,
      all[0]!.assign,
      spans.map((s) => s.sequence_id),
      spans.map((s) => s.trace_id),
      spans.map((s) => s.span_id),
      spans.map((s) => s.parent_id),
      spans.map((s) => s.name),
      spans.map((s) => s.start_time),
      spans.map((s) => s.end_time),
      `[${spans.map((s) => toJsonRequired(s, "span")).join(",")}]`,
      now,
    ],
  });
  return rows;
}

/**
 * Migration 6's function: one span as scalars. Its answer in the shape of the others: a row of NULLs
 * when it covers nothing, no row when the span was already stored, else the span's row.
 */
export async function callForOneSpan(c: Queryable, entry: Entry, now: number): Promise<IngestRow[]> {
  const { span, assign } = entry;
  const { rows } = await c.query<{ o_covered: boolean; o_seq: number | null; o_deadline: number | null }>({
    name: "agl_ingest_one_span",
    text: "SELECT * FROM agl_ingest_one_span($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    values: [
      span.rollout_id,
      span.attempt_id,
      assign,
      span.sequence_id,
      span.trace_id,
      span.span_id,
      span.parent_id,
      span.name,
      span.start_time,
      span.end_time,
      toJsonRequired(span, "span"),
      now,
    ],
  });
  const row = rows[0]!;
  if (!row.o_covered) return [{ o_rid: null, o_aid: null, o_sid: null, o_seq: null, o_deadline: null }];
  if (row.o_seq === null) return [];
  return [
    {
      o_rid: span.rollout_id,
      o_aid: span.attempt_id,
      o_sid: span.span_id,
      o_seq: row.o_seq,
      o_deadline: row.o_deadline,
    },
  ];
}

/** Migration 3's function: any batch, as column arrays. */
export async function callForMany(c: Queryable, all: readonly Entry[], now: number): Promise<IngestRow[]> {
  const { rows } = await c.query<IngestRow>({
    name: "agl_ingest_spans",
    text: "SELECT * FROM agl_ingest_spans($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    values: [...spanColumns(all.map((e) => e.span)), all.map((e) => e.assign), now],
  });
  return rows;
}
