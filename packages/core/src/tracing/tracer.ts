import {
  type Span as OtelSpan,
  context as otelContext,
  trace as otelTrace,
  type SpanOptions,
  type Tracer,
} from "@opentelemetry/api";
import { BasicTracerProvider, type SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { z } from "zod";
import { consoleLogger, isLogger, type Logger } from "../logger.js";
import { parseOptions } from "../options.js";
import type { LightningStore } from "../store/store.js";
import { currentFrame, traceStorage } from "./context.js";
import { RolloutTrace } from "./rollout-trace.js";
import { LightningSpanProcessor } from "./span-processor.js";

// On the prototype, so a tracer made by another copy of @agl/core is still recognised (no instanceof).
const LIGHTNING_TRACER = Symbol.for("agl.LightningTracer");

const isSpanProcessor = (v: unknown): v is SpanProcessor =>
  typeof v === "object" && v !== null && typeof (v as SpanProcessor).onEnd === "function";

export const LightningTracerOptionsSchema = z.object({
  /** Stored as `agentlightning.tracer.name` and used as the OTel instrumentation scope. */
  name: z.string().min(1).optional(),
  logger: z.custom<Logger>(isLogger, "must have debug/info/warn/error methods").optional(),
  /** Extra processors (e.g. an exporter to your own backend) added to this tracer's private provider. */
  spanProcessors: z
    .array(z.custom<SpanProcessor>(isSpanProcessor, "must be an OTel SpanProcessor"))
    .optional(),
});
export type LightningTracerOptions = z.input<typeof LightningTracerOptionsSchema>;

/**
 * Creates the OpenTelemetry spans of rollouts. It owns a private BasicTracerProvider, so it never
 * replaces or competes with a global provider the application registered; spans made through a global
 * provider still reach the store if that provider has a {@link LightningSpanProcessor}.
 *
 * There is no process-wide "active tracer": which attempt a span belongs to is decided by the async
 * context (`RolloutTrace.run`), so any number of rollouts can run concurrently in one process.
 */
export class LightningTracer {
  readonly name: string;
  readonly logger: Logger;
  readonly provider: BasicTracerProvider;
  readonly otelTracer: Tracer;

  constructor(input: LightningTracerOptions = {}) {
    const options = parseOptions(LightningTracerOptionsSchema, input, "tracer");
    this.name = options.name ?? "agentlightning";
    this.logger = options.logger ?? consoleLogger();
    this.provider = new BasicTracerProvider({
      spanProcessors: [new LightningSpanProcessor(), ...(options.spanProcessors ?? [])],
    });
    this.otelTracer = this.provider.getTracer(this.name);
  }

  /** A trace for one attempt; run the agent inside `trace.run(...)` and `await trace.flush()` after. */
  traceAttempt(options: {
    rolloutId: string;
    attemptId: string;
    store: LightningStore | null;
    /** Waits between flush rounds that resend unacknowledged spans (RolloutTraceOptions.retryDelaysMs). */
    retryDelaysMs?: readonly number[];
  }): RolloutTrace {
    return new RolloutTrace({ ...options, tracerName: this.name, logger: this.logger, tracer: this });
  }

  /**
   * Start a span under the current parent: the innermost agentlightning span of this async context,
   * else the span active in the global OTel context (so spans nest under an app's own spans).
   */
  startSpan(name: string, options: SpanOptions = {}): OtelSpan {
    const frame = currentFrame();
    const base = otelContext.active();
    const parentContext = frame?.parent ? otelTrace.setSpan(base, frame.parent) : base;
    return this.otelTracer.startSpan(name, options, parentContext);
  }

  /** Run `fn` with `span` as the parent of spans started inside it (ours and, with a context manager, OTel's). */
  withParent<T>(span: OtelSpan, fn: () => T): T {
    const frame = currentFrame();
    const inOtel = () => otelContext.with(otelTrace.setSpan(otelContext.active(), span), fn);
    return frame ? traceStorage.run({ trace: frame.trace, parent: span }, inOtel) : inOtel();
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }

  static isInstance(value: unknown): value is LightningTracer {
    return typeof value === "object" && value !== null && (value as any)[LIGHTNING_TRACER] === true;
  }
}

Object.defineProperty(LightningTracer.prototype, LIGHTNING_TRACER, { value: true });

let fallback: LightningTracer | undefined;

/**
 * The tracer emitters and instrumentations use when none was given: only a span factory, shared by
 * every rollout (attribution comes from the async context, not from this object).
 */
export function defaultTracer(): LightningTracer {
  fallback ??= new LightningTracer();
  return fallback;
}
