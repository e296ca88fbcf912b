import type { Context } from "@opentelemetry/api";
import type { ReadableSpan, Span as SdkSpan, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { currentFrame } from "./context.js";
import type { RolloutTrace } from "./rollout-trace.js";

/**
 * Routes every span that starts inside a rollout's async context to that rollout's trace when it ends.
 * Our tracers use it internally; add one to your own (global) TracerProvider to also store the spans
 * your other instrumentations create during a rollout.
 */
export class LightningSpanProcessor implements SpanProcessor {
  // The owner is captured at start: a span may end in another async context (e.g. a stream's consumer).
  private readonly owners = new WeakMap<object, RolloutTrace>();

  onStart(span: SdkSpan, _parentContext: Context): void {
    const frame = currentFrame();
    if (frame) this.owners.set(span, frame.trace);
  }

  onEnd(span: ReadableSpan): void {
    const owner = this.owners.get(span);
    if (!owner) return;
    this.owners.delete(span);
    owner.acceptReadable(span);
  }

  forceFlush(): Promise<void> {
    return Promise.resolve();
  }

  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}
