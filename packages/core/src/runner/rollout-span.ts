import { SpanStatusCode } from "@opentelemetry/api";
import type { RolloutTrace } from "../tracing/rollout-trace.js";
import type { LightningTracer } from "../tracing/tracer.js";
import type { AttemptedRollout } from "../types/rollout.js";

/** Name of the span that encloses one attempt of the agent. */
export const ROLLOUT_SPAN_NAME = "agent.rollout";

/**
 * Run the agent under one enclosing `agent.rollout` span, so every span of the attempt (LLM calls,
 * tools, rewards, the app's own OTel spans) shares its trace id: one rollout is one trace in any OTel
 * backend instead of a forest of unrelated roots. The span fails when the agent throws.
 */
export async function withRolloutSpan<T>(
  tracer: LightningTracer,
  trace: RolloutTrace,
  attempted: AttemptedRollout,
  fn: () => T | Promise<T>,
): Promise<T> {
  const span = tracer.startSpan(ROLLOUT_SPAN_NAME, {
    attributes: {
      "agentlightning.rollout_id": attempted.rollout_id,
      "agentlightning.attempt_id": attempted.attempt.attempt_id,
      "agentlightning.attempt_sequence_id": attempted.attempt.sequence_id,
      ...(attempted.mode ? { "agentlightning.rollout_mode": attempted.mode } : {}),
    },
  });
  const { traceId, spanId } = span.spanContext();
  trace.setRoot({ traceId, spanId });
  try {
    return await tracer.withParent(span, fn);
  } catch (error) {
    span.setStatus({
      code: SpanStatusCode.ERROR,
      message: error instanceof Error ? error.message : String(error),
    });
    throw error;
  } finally {
    span.end();
  }
}
