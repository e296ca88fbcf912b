import { SpanStatusCode } from "@opentelemetry/api";
import { currentFrame } from "../tracing/context.js";
import { coreFields } from "../tracing/core-fields.js";
import { defaultTracer, type LightningTracer } from "../tracing/tracer.js";
import type { Attributes, SpanCoreFields, SpanStatus } from "../types/span.js";

export interface EmitOptions {
  /**
   * false: only build and return the span's core fields, record nothing (the reference's
   * `propagate=False`). Default true: record the span in the current rollout's trace.
   */
  propagate?: boolean;
  /** Tracer to create the span with; default: the one tracing the current rollout. */
  tracer?: LightningTracer;
}

let warnedOutside = false;

/**
 * Build a span that starts and ends now and, when inside a rollout, record it there. Outside a rollout
 * the span cannot be attributed, so it is only returned (with a one-time warning) instead of throwing
 * into agent code that is being run on its own.
 */
export function recordSpan(
  name: string,
  attributes: Attributes,
  options: EmitOptions = {},
  extra: { status?: Partial<SpanStatus>; exception?: Error } = {},
): SpanCoreFields {
  const core = coreFields(name, attributes, extra.status);
  if (options.propagate === false) return core;
  const frame = currentFrame();
  const tracer = options.tracer ?? frame?.trace.tracer ?? defaultTracer();
  if (!frame) {
    if (!warnedOutside) {
      warnedOutside = true;
      tracer.logger.warn(
        `${name} emitted outside a rollout: it is returned but not stored (run the agent through a Runner or Trainer, or pass propagate: false)`,
      );
    }
    return core;
  }
  const startTime = core.start_time! * 1000;
  const span = tracer.startSpan(name, { attributes: attributes as any, startTime });
  if (extra.exception) span.recordException(extra.exception, startTime);
  const code = core.status.status_code;
  if (code !== "UNSET") {
    span.setStatus({
      code: code === "OK" ? SpanStatusCode.OK : SpanStatusCode.ERROR,
      message: core.status.description ?? undefined,
    });
  }
  span.end(startTime);
  return core;
}
