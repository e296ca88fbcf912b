/** The span the PostgreSQL call benchmarks store: an OTLP span as the store passes it on (placeholder sequence id). */
import type { Span } from "@agl/core";

export const benchSpan = (rid: string, aid: string, spanId: string, promptChars = 120): Span =>
  ({
    rollout_id: rid,
    attempt_id: aid,
    sequence_id: 0,
    trace_id: "ab".repeat(16),
    span_id: spanId,
    parent_id: null,
    name: `llm-call-${spanId}`,
    status: { status_code: "OK", description: null },
    attributes: { "gen_ai.prompt": "x".repeat(promptChars) },
    events: [],
    links: [],
    start_time: 1,
    end_time: 2,
    context: null,
    parent: null,
    resource: { attributes: {}, schema_url: "" },
  }) as unknown as Span;
