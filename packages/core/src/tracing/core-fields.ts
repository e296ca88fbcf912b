import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { newSpanId, newTraceId, nowSeconds } from "../types/ids.js";
import type { Attributes, Span, SpanCoreFields, SpanStatus } from "../types/span.js";
import { RESOURCE_ATTR } from "./conventions.js";
import { type SpanIds, spanFromReadable } from "./otel-span.js";

/** Core fields of a span that starts and ends now. */
export function coreFields(
  name: string,
  attributes: Attributes,
  status?: Partial<SpanStatus>,
): SpanCoreFields {
  const t = nowSeconds();
  return {
    name,
    status: { status_code: status?.status_code ?? "OK", description: status?.description ?? null },
    attributes,
    start_time: t,
    end_time: t,
  };
}

/** Whether a value looks like SpanCoreFields rather than a stored Span or an OTel span. */
export function isSpanCoreFields(value: unknown): value is SpanCoreFields {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.name === "string" && !("span_id" in v) && typeof v.spanContext !== "function";
}

export function isReadableSpan(value: unknown): value is ReadableSpan {
  return (
    typeof value === "object" && value !== null && typeof (value as ReadableSpan).spanContext === "function"
  );
}

export interface StampOptions extends SpanIds {
  tracerName: string;
}

/** Add the Agent Lightning resource keys (rollout, attempt, sequence, tracer) to a stored span. */
export function stampResource(span: Span, ids: StampOptions): Span {
  span.resource = {
    ...span.resource,
    attributes: {
      ...span.resource.attributes,
      [RESOURCE_ATTR.rolloutId]: ids.rolloutId,
      [RESOURCE_ATTR.attemptId]: ids.attemptId,
      [RESOURCE_ATTR.spanSequenceId]: ids.sequenceId,
      [RESOURCE_ATTR.tracerName]: ids.tracerName,
    },
  };
  return span;
}

export function spanFromReadableStamped(readable: ReadableSpan, ids: StampOptions): Span {
  return stampResource(spanFromReadable(readable, ids), ids);
}

/** A full stored Span from core fields: fresh trace and span ids, no parent. */
export function spanFromCoreFields(core: SpanCoreFields, ids: StampOptions): Span {
  const traceId = newTraceId();
  const spanId = newSpanId();
  return stampResource(
    {
      rollout_id: ids.rolloutId,
      attempt_id: ids.attemptId,
      sequence_id: ids.sequenceId,
      trace_id: traceId,
      span_id: spanId,
      parent_id: null,
      name: core.name,
      status: { status_code: core.status.status_code, description: core.status.description ?? null },
      attributes: { ...core.attributes },
      events: [],
      links: [],
      start_time: core.start_time,
      end_time: core.end_time,
      context: { trace_id: traceId, span_id: spanId, is_remote: false, trace_state: {} },
      parent: null,
      resource: { attributes: {}, schema_url: "" },
    },
    ids,
  );
}
