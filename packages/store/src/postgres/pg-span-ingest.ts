/**
 * Span batches in one round trip: the migration's `agl_ingest_spans` locks the rollouts, checks the
 * targets, hands out the missing sequence ids, inserts the spans and records their activity
 * (heartbeat; a first span moves a preparing attempt and its rollout to running; the watchdog
 * deadline), all in one call that PostgreSQL commits before it answers. Batches it does not cover
 * (see the migration) get `null` here, and the store runs its general transaction (ingestSpanBatch).
 */
import type { Span } from "@agl/core";
import type { Settled } from "../shared/group-commit.js";
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
  const spans = all.map((e) => e.span);
  const { rows } = await c.query<{
    o_rid: string | null;
    o_aid: string;
    o_sid: string;
    o_seq: number;
    o_deadline: number | null;
  }>({
    name: "agl_ingest_spans",
    text: "SELECT * FROM agl_ingest_spans($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
    values: [...spanColumns(spans), all.map((e) => e.assign), now],
  });
  if (rows.length === 1 && rows[0]!.o_rid === null) return null;
  const stored = new Map(
    rows.map((r) => [spanKey({ rollout_id: r.o_rid!, attempt_id: r.o_aid, span_id: r.o_sid }), r.o_seq]),
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
