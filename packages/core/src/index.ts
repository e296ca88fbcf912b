export * from "./adapter.js";
export * from "./agent/lit-agent.js";
export * from "./agent/resources.js";
export * from "./agent/rollout.js";
export * from "./agent/types.js";
export * from "./auth/scoped-token.js";
// --- runtime: logging, tracing, emitters, instrumentation, agents, runner, trainer
export * from "./cli-support.js";
export * from "./emitters/emit.js";
export * from "./emitters/operation.js";
export type { EmitOptions } from "./emitters/record.js";
export * from "./emitters/reward.js";
export * from "./emitters/reward-reader.js";
export * from "./errors.js";
export * from "./instrument/openai.js";
export * from "./log-wiring.js";
export * from "./logger.js";
export { httpUrl, httpUrlProblem, isLightningStore, parseOptions } from "./options.js";
export * from "./redact.js";
export * from "./runner/retry-backoff.js";
export * from "./runner/runner.js";
export * from "./runner/system-snapshot.js";
export * from "./store/inputs.js";
export { type SpanEvictionOptions, SpanEvictionOptionsSchema } from "./store/memory/eviction.js";
export * from "./store/memory-store.js";
export * from "./store/query.js";
export * from "./store/query-schemas.js";
export { isCanonicalSpan } from "./store/span-input.js";
export * from "./store/span-sanitize.js";
export * from "./store/state-machine.js";
export type * from "./store/store.js";
export { currentRolloutTrace, type TraceFrame } from "./tracing/context.js";
export * from "./tracing/conventions.js";
export { coreFields, isReadableSpan, isSpanCoreFields, spanFromCoreFields } from "./tracing/core-fields.js";
export {
  type FlatAttributes,
  flattenAttributes,
  type NonPrimitivePolicy,
  type Primitive,
} from "./tracing/flatten.js";
export * from "./tracing/otel-span.js";
export * from "./tracing/rollout-trace.js";
export * from "./tracing/span-processor.js";
export * from "./tracing/tracer.js";
export * from "./trainer/algorithm.js";
export * from "./trainer/baseline.js";
export * from "./trainer/trainer.js";
export * from "./types/ids.js";
export * from "./types/input-rules.js";
export * from "./types/json-nesting.js";
export * from "./types/misc.js";
export * from "./types/resources.js";
export * from "./types/rollout.js";
export * from "./types/span.js";
export * from "./types/validate.js";
