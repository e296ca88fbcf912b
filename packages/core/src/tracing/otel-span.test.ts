import { SpanSchema } from "@agl/core";
import { context, SpanKind, SpanStatusCode, TraceFlags, trace } from "@opentelemetry/api";
import { TraceState } from "@opentelemetry/core";
import type { ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";
import { describe, expect, it } from "vitest";
import { hrTimeToSeconds, spanFromReadable } from "./otel-span.js";

const ids = { rolloutId: "ro-000000000001", attemptId: "at-00000001", sequenceId: 7 };

describe("spanFromReadable", () => {
  it("converts ids, parent, times, status, events, links and resource", () => {
    const provider = new BasicTracerProvider();
    const tracer = provider.getTracer("t");
    const linked = {
      traceId: "1".repeat(32),
      spanId: "2".repeat(16),
      traceFlags: TraceFlags.SAMPLED,
      isRemote: true,
      traceState: new TraceState("vendor=abc,other=1"),
    };
    const parent = tracer.startSpan("parent");
    const child = tracer.startSpan(
      "child",
      {
        kind: SpanKind.CLIENT,
        attributes: { "gen_ai.request.model": "m", list: [1, 2, 3], flag: true },
        links: [{ context: linked, attributes: { why: "retry" } }],
        startTime: [1_700_000_000, 500_000_000],
      },
      trace.setSpan(context.active(), parent),
    );
    child.addEvent("token", { n: 1 }, [1_700_000_000, 750_000_000]);
    child.setStatus({ code: SpanStatusCode.ERROR, message: "boom" });
    child.end([1_700_000_001, 0]);
    parent.end();

    const readable = child as unknown as ReadableSpan;
    const span = spanFromReadable(readable, ids);
    expect(span).toMatchObject({
      rollout_id: ids.rolloutId,
      attempt_id: ids.attemptId,
      sequence_id: 7,
      trace_id: parent.spanContext().traceId,
      span_id: child.spanContext().spanId,
      parent_id: parent.spanContext().spanId,
      name: "child",
      status: { status_code: "ERROR", description: "boom" },
      attributes: { "gen_ai.request.model": "m", list: [1, 2, 3], flag: true },
      start_time: 1_700_000_000.5,
      end_time: 1_700_000_001,
      events: [{ name: "token", attributes: { n: 1 }, timestamp: 1_700_000_000.75 }],
      links: [
        {
          context: {
            trace_id: linked.traceId,
            span_id: linked.spanId,
            is_remote: true,
            trace_state: { vendor: "abc", other: "1" },
          },
          attributes: { why: "retry" },
        },
      ],
      context: {
        trace_id: parent.spanContext().traceId,
        span_id: child.spanContext().spanId,
        is_remote: false,
      },
      parent: { span_id: parent.spanContext().spanId },
    });
    // The SDK's default resource describes the SDK itself.
    expect(span.resource.attributes).toMatchObject({ "telemetry.sdk.language": "nodejs" });
    expect(span.trace_id).toMatch(/^[0-9a-f]{32}$/);
    // The result is a valid stored span and survives JSON.
    expect(SpanSchema.parse(JSON.parse(JSON.stringify(span)))).toEqual(span);
  });

  it("takes resource attributes and schema url from the span's resource", () => {
    const span = new BasicTracerProvider().getTracer("t").startSpan("r");
    span.end();
    const withResource = Object.create(span, {
      resource: {
        value: { attributes: { "service.name": "agent", n: 2, gone: undefined }, schemaUrl: "https://s" },
      },
    }) as ReadableSpan;
    expect(spanFromReadable(withResource, ids).resource).toEqual({
      attributes: { "service.name": "agent", n: 2 },
      schema_url: "https://s",
    });
  });

  it("maps OK/UNSET, a root span has no parent, and an unended span has no end_time", () => {
    const tracer = new BasicTracerProvider().getTracer("t");
    const ok = tracer.startSpan("ok");
    ok.setStatus({ code: SpanStatusCode.OK });
    ok.end();
    const okSpan = spanFromReadable(ok as unknown as ReadableSpan, ids);
    expect(okSpan.status).toEqual({ status_code: "OK", description: null });
    expect(okSpan.parent_id).toBeNull();
    expect(okSpan.parent).toBeNull();
    expect(okSpan.links).toEqual([]);

    const open = tracer.startSpan("open");
    const openSpan = spanFromReadable(open as unknown as ReadableSpan, ids);
    expect(openSpan.status.status_code).toBe("UNSET");
    expect(openSpan.end_time).toBeNull();
    expect(openSpan.start_time).toBeGreaterThan(1e9);
    open.end();
  });

  it("converts hrtime tuples to epoch seconds", () => {
    expect(hrTimeToSeconds([12, 250_000_000])).toBe(12.25);
    expect(hrTimeToSeconds([0, 0])).toBeNull();
    expect(hrTimeToSeconds(undefined)).toBeNull();
  });
});
