import { emitReward } from "../emitters/reward.js";
import { InvalidArgumentError } from "../errors.js";
import type { Logger } from "../logger.js";
import { isReadableSpan, isSpanCoreFields } from "../tracing/core-fields.js";
import type { RolloutTrace } from "../tracing/rollout-trace.js";
import type { SpanInput } from "../types/span.js";

/**
 * Record what the agent returned (Agent Lightning v0.3 §7): a number or boolean becomes a reward span;
 * nothing leaves the traced spans as they are; a list adds each span (OTel ReadableSpans, SpanCoreFields,
 * or stored-Span shapes) to this attempt. Anything else throws, failing the attempt.
 */
export function recordAgentResult(result: unknown, trace: RolloutTrace, logger: Logger): void {
  if (result === undefined || result === null) return;
  if (typeof result === "number" || typeof result === "boolean") {
    if (typeof result === "number" && !Number.isFinite(result)) {
      throw new InvalidArgumentError("result", `agent returned a non-finite reward (${result})`);
    }
    trace.addCoreFields(emitReward(Number(result), { propagate: false }));
    return;
  }
  if (Array.isArray(result)) {
    if (result.length === 0) {
      logger.warn(`agent returned an empty span list for ${trace.rolloutId}; only traced spans are kept`);
      return;
    }
    result.forEach((item, i) => {
      if (isReadableSpan(item)) trace.acceptReadable(item);
      else if (isSpanCoreFields(item)) trace.addCoreFields(item);
      else if (isSpanShape(item)) trace.addSpan(item);
      else {
        throw new InvalidArgumentError(
          `result[${i}]`,
          "is not a span (expected a Span, SpanCoreFields or ReadableSpan)",
        );
      }
    });
    return;
  }
  throw new InvalidArgumentError(
    "result",
    `agent returned ${typeof result}; expected a number, nothing, or a list of spans`,
  );
}

function isSpanShape(value: unknown): value is SpanInput {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.name === "string" && (typeof v.span_id === "string" || typeof v.trace_id === "string");
}
