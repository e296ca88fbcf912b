import { AsyncLocalStorage } from "node:async_hooks";
import type { Span as OtelSpan } from "@opentelemetry/api";
import type { RolloutTrace } from "./rollout-trace.js";

/** What the async context carries: the attempt being traced and the span new spans should nest under. */
export interface TraceFrame {
  trace: RolloutTrace;
  parent: OtelSpan | undefined;
}

// Shared through a registered symbol so two copies of @agl/core in one process (a bundled agent plus
// the runner) still see the same rollout context.
const KEY = Symbol.for("agl.tracing.storage");
const holder = globalThis as unknown as Record<symbol, AsyncLocalStorage<TraceFrame> | undefined>;
export const traceStorage: AsyncLocalStorage<TraceFrame> = (holder[KEY] ??=
  new AsyncLocalStorage<TraceFrame>());

export function currentFrame(): TraceFrame | undefined {
  return traceStorage.getStore();
}

/** The attempt whose code is running in the current async context, if any. */
export function currentRolloutTrace(): RolloutTrace | undefined {
  return traceStorage.getStore()?.trace;
}
