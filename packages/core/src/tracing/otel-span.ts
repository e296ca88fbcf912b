/**
 * Conversion of an OpenTelemetry SDK (v2) ReadableSpan into the store's Span shape (Agent Lightning
 * v0.3 §1.2): ids as lowercase hex, hrtime tuples as epoch-second floats, numeric status codes as
 * "UNSET" | "OK" | "ERROR", and the parent taken from `parentSpanContext` (the v2 API).
 */
import type {
  HrTime,
  Attributes as OtelAttributes,
  SpanContext as OtelSpanContext,
} from "@opentelemetry/api";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import type { Attributes, Span, SpanContext, StatusCode } from "../types/span.js";

export interface SpanIds {
  rolloutId: string;
  attemptId: string;
  sequenceId: number;
}

const STATUS_CODES: Record<number, StatusCode> = { 0: "UNSET", 1: "OK", 2: "ERROR" };

/** An hrtime tuple as epoch seconds; an all-zero tuple (a span that has not ended) as null. */
export function hrTimeToSeconds(time: HrTime | undefined | null): number | null {
  if (!time) return null;
  const [seconds, nanos] = time;
  if (seconds === 0 && nanos === 0) return null;
  return seconds + nanos / 1e9;
}

/** Parse a W3C tracestate header value ("k1=v1,k2=v2") into a record. */
function traceStateRecord(context: OtelSpanContext): Record<string, string> {
  const serialized = context.traceState?.serialize();
  const out: Record<string, string> = {};
  if (!serialized) return out;
  for (const member of serialized.split(",")) {
    const eq = member.indexOf("=");
    if (eq > 0) out[member.slice(0, eq).trim()] = member.slice(eq + 1).trim();
  }
  return out;
}

export function spanContextFromOtel(context: OtelSpanContext): SpanContext {
  return {
    trace_id: context.traceId,
    span_id: context.spanId,
    is_remote: context.isRemote ?? false,
    trace_state: traceStateRecord(context),
  };
}

/** Copy attributes, dropping `undefined` values (OTel allows them; JSON cannot carry them). */
export function attributesFromOtel(attributes: OtelAttributes | undefined | null): Attributes {
  const out: Attributes = {};
  if (!attributes) return out;
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined) continue;
    out[key] = Array.isArray(value) ? (value.slice() as Attributes[string]) : (value as Attributes[string]);
  }
  return out;
}

/** Convert a finished (or in-flight) SDK span into a store Span for the given rollout/attempt/sequence. */
export function spanFromReadable(readable: ReadableSpan, ids: SpanIds): Span {
  const context = readable.spanContext();
  const parent = readable.parentSpanContext;
  const resource = readable.resource;
  const span: Span = {
    rollout_id: ids.rolloutId,
    attempt_id: ids.attemptId,
    sequence_id: ids.sequenceId,
    trace_id: context.traceId,
    span_id: context.spanId,
    parent_id: parent?.spanId ?? null,
    name: readable.name,
    status: {
      status_code: STATUS_CODES[readable.status?.code ?? 0] ?? "UNSET",
      description: readable.status?.message ?? null,
    },
    attributes: attributesFromOtel(readable.attributes),
    events: (readable.events ?? []).map((event) => ({
      name: event.name,
      attributes: attributesFromOtel(event.attributes),
      timestamp: hrTimeToSeconds(event.time),
    })),
    links: (readable.links ?? []).map((link) => ({
      context: spanContextFromOtel(link.context),
      attributes: link.attributes ? attributesFromOtel(link.attributes) : null,
    })),
    start_time: hrTimeToSeconds(readable.startTime),
    end_time: readable.ended === false ? null : hrTimeToSeconds(readable.endTime),
    context: spanContextFromOtel(context),
    parent: parent ? spanContextFromOtel(parent) : null,
    resource: {
      attributes: attributesFromOtel(resource?.attributes),
      schema_url: resource?.schemaUrl ?? "",
    },
  };
  return span;
}
